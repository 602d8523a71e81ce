#include "engine/checkpoint/restore.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <thread>

#include "common/errno_status.h"
#include "common/log.h"
#include "common/owned_fd.h"
#include "common/thread_annotations.h"
#include "engine/checkpoint/drain_plan.h"
#include "engine/checkpoint/drain_record.h"
#include "engine/checkpoint/origin_writer.h"
#include "engine/checkpoint/tree_watch.h"
#include "engine/core/manifest_path.h"

namespace granary::checkpoint {
namespace {

constexpr int64_t kPiece = 8 << 20;  // bytes read from the origin at a time

Status writeAll(int fd, const std::string& bytes, const std::string& what) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) return errnoStatus(errno, "cannot write " + what);
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

// One file the restore brings: from a peer when one holds the version wanted, else from the
// origin.
struct Wanted {
  std::string path;
  int64_t size = 0;
  const cache::OriginObject* origin = nullptr;  // the origin's version; null: only peers have it
  PeerTree* peer = nullptr;
  PeerFile peerFile;
  bool peerHasOrigins = false;  // the peer's version is the origin's
};

Status readFromOrigin(cache::Origin& origin, const cache::OriginObject& object, int fd,
                      const std::string& staged, std::stop_token stop,
                      const std::function<void(int64_t)>& arrived) {
  for (int64_t at = 0; at < object.size;) {
    if (stop.stop_requested()) return cancelled("the restore was stopped");
    GRANARY_ASSIGN_OR_RETURN(
        const std::string piece,
        origin.read(object.path, at, std::min(kPiece, object.size - at), object.etag));
    if (piece.empty())
      return failedPrecondition(object.path + " at the origin is shorter than listed");
    GRANARY_RETURN_IF_ERROR(writeAll(fd, piece, staged));
    at += static_cast<int64_t>(piece.size());
    arrived(static_cast<int64_t>(piece.size()));
  }
  return Status::ok();
}

// Reads `file` whole into `staged` (from its peer, else the origin), then renames it to its
// place in the tree. `arrived` is told of each piece and whether it came from a peer.
Status fetch(cache::Origin& origin, const Wanted& file, const RestoreOptions& options,
             const std::filesystem::path& staged, std::stop_token stop,
             const std::function<void(int64_t, bool)>& arrived) {
  OwnedFd out(::open(staged.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return errnoStatus(errno, "cannot create " + staged.string());
  Status read = failedPrecondition("no peer holds " + file.path);
  if (file.peer) {
    read = file.peer->read(file.peerFile, out.get(), [&](int64_t n) { arrived(n, true); });
    if (!read.isOk() && file.origin && ::ftruncate(out.get(), 0) != 0)
      return errnoStatus(errno, "cannot truncate " + staged.string());
  }
  if (!read.isOk() && file.origin)  // the peer failed: the origin has it
    read = readFromOrigin(origin, *file.origin, out.get(), staged.string(), stop,
                          [&](int64_t n) { arrived(n, false); });
  GRANARY_RETURN_IF_ERROR(read);
  if (::fsync(out.get()) != 0) return errnoStatus(errno, "cannot sync " + staged.string());
  const std::filesystem::path target = options.tree / file.path;
  std::error_code error;
  std::filesystem::create_directories(target.parent_path(), error);
  if (error)
    return unavailable("cannot create " + target.parent_path().string() + ": " + error.message());
  std::filesystem::rename(staged, target, error);
  if (error) return unavailable("cannot place " + target.string() + ": " + error.message());
  return Status::ok();
}

// Fetches files [begin, end) of `wanted`, a few at a time, into the tree, entering each of the
// origin's versions in `record`; the first failure ends it (the fetches under way finish).
class Fetches {
 public:
  Fetches(cache::Origin& origin, const RestoreOptions& options, std::stop_token stop,
          RestoreProgress& progress, std::map<std::string, FileIdentity>& record,
          const std::function<void(const RestoreProgress&)>& report)
      : origin_(origin),
        options_(options),
        stop_(std::move(stop)),
        progress_(progress),
        record_(record),
        report_(report) {}

  Status run(const std::vector<Wanted>& wanted, size_t begin, size_t end) {
    std::atomic<size_t> next = begin;
    {
      std::vector<std::jthread> fetchers;
      const size_t count = std::min(end - begin, kFetchesAtOnce);
      for (size_t k = 0; k < count; ++k)
        fetchers.emplace_back([&] {
          for (size_t at = next++; at < end && failed().isOk(); at = next++)
            fetchOne(wanted[at], at);
        });
    }
    return failed();
  }

 private:
  static constexpr size_t kFetchesAtOnce = 4;

  void fetchOne(const Wanted& file, size_t index) {
    bool fromPeer = false;
    const Status s = fetch(origin_, file, options_, options_.staging / std::to_string(index), stop_,
                           [&](int64_t bytes, bool peer) {
                             MutexLock lock(mutex_);
                             progress_.bytes += bytes;
                             if (peer) progress_.peerBytes += bytes;
                             fromPeer = peer;
                             report_(progress_);
                           });
    MutexLock lock(mutex_);
    if (!s.isOk()) {
      if (failed_.isOk()) failed_ = s;
      return;
    }
    ++progress_.files;
    if (fromPeer) ++progress_.peerFiles;
    // A version the origin has not is not recorded: this node's drain uploads it.
    if (fromPeer ? !file.peerHasOrigins : !file.origin) return;
    if (const auto placed = identityOf(options_.tree / file.path)) record_[file.path] = *placed;
  }

  Status failed() {
    MutexLock lock(mutex_);
    return failed_;
  }

  cache::Origin& origin_;
  const RestoreOptions& options_;
  const std::stop_token stop_;
  Mutex mutex_;
  RestoreProgress& progress_ GRANARY_GUARDED_BY(mutex_);
  std::map<std::string, FileIdentity>& record_ GRANARY_GUARDED_BY(mutex_);
  const std::function<void(const RestoreProgress&)>& report_;
  Status failed_ GRANARY_GUARDED_BY(mutex_);
};

// What the origin holds.
Result<std::vector<cache::OriginObject>> originFiles(cache::Origin& origin) {
  std::vector<cache::OriginObject> files;
  GRANARY_RETURN_IF_ERROR(origin.list([&](std::vector<cache::OriginObject>&& batch) {
    for (auto& o : batch)
      if (!o.path.starts_with(std::string(kStagingDirectory) + "/")) files.push_back(std::move(o));
    return Status::ok();
  }));
  return files;
}

// Each peer's files by path, in the peers' order; a peer that cannot be listed is left out.
std::map<std::string, std::vector<std::pair<PeerTree*, PeerFile>>> peerFiles(
    const std::vector<std::shared_ptr<PeerTree>>& peers) {
  std::map<std::string, std::vector<std::pair<PeerTree*, PeerFile>>> byPath;
  for (const auto& peer : peers) {
    auto listed = peer->list();
    if (!listed.isOk()) {
      Logger("checkpoints")
          .info("a peer's checkpoint tree cannot be listed; restoring without it",
                {{"node", peer->node()}, {"error", listed.status()}});
      continue;
    }
    for (PeerFile& f : *listed) byPath[f.path].emplace_back(peer.get(), std::move(f));
  }
  return byPath;
}

// Where the restore reads `path` from: a peer holding the origin's version `o`; else, for one
// newer than the origin's (or one the origin lacks), the peer with the newest; else the origin.
Wanted sourceOf(const std::string& path, const cache::OriginObject* o,
                const std::vector<std::pair<PeerTree*, PeerFile>>& peers) {
  Wanted w{.path = path, .size = o ? o->size : 0, .origin = o};
  for (const auto& [peer, file] : peers)
    if (o && file.atOrigin && file.size == o->size) {
      w.peer = peer;
      w.peerFile = file;
      w.peerHasOrigins = true;
      return w;
    }
  for (const auto& [peer, file] : peers) {
    const bool newer = !file.atOrigin && (!o || file.modifiedNanos > o->modifiedUnixNanos);
    if (newer && (!w.peer || file.modifiedNanos > w.peerFile.modifiedNanos)) {
      w.peer = peer;
      w.peerFile = file;
    }
  }
  if (w.peer) w.size = w.peerFile.size;
  return w;
}

}  // namespace

Result<RestoreProgress> restoreTree(cache::Origin& origin, const RestoreOptions& options,
                                    std::stop_token stop,
                                    const std::function<void(const RestoreProgress&)>& progressed) {
  const std::function<void(const RestoreProgress&)> report =
      progressed ? progressed : [](const RestoreProgress&) {};
  GRANARY_ASSIGN_OR_RETURN(const std::vector<OriginEntry> recorded,
                           readDrainRecord(options.recordFile));
  std::map<std::string, FileIdentity> record;
  for (const OriginEntry& e : recorded) record[e.path] = e.identity;
  GRANARY_ASSIGN_OR_RETURN(const std::vector<cache::OriginObject> files, originFiles(origin));
  auto fromPeers = peerFiles(options.peers);

  RestoreProgress progress;
  std::map<std::string, const cache::OriginObject*> atOrigin;
  for (const cache::OriginObject& o : files) atOrigin[o.path] = &o;
  std::vector<Wanted> wanted;
  const auto want = [&](const std::string& path, const cache::OriginObject* o) {
    const Wanted w = sourceOf(path, o, fromPeers[path]);
    if (!w.origin && !w.peer) return;
    const auto local = identityOf(options.tree / path);
    const auto held = record.find(path);
    // The node's copy wins unless it is the version the origin had and the origin changed since,
    // or a peer holds a newer one.
    const bool unchangedHere = local && held != record.end() && held->second == *local;
    const bool newer =
        w.peer && !w.peerHasOrigins && local && w.peerFile.modifiedNanos > local->modifiedNanos;
    if (local && !(unchangedHere && local->size != w.size) && !newer) {
      ++progress.localFiles;
      return;
    }
    wanted.push_back(w);
    ++progress.totalFiles;
    progress.totalBytes += w.size;
  };
  for (const cache::OriginObject& o : files) want(o.path, &o);
  for (const auto& [path, _] : fromPeers)
    if (!atOrigin.contains(path) && cache::validateManifestPath(path).isOk()) want(path, nullptr);
  // The files, then the markers once every file is in place.
  std::stable_sort(wanted.begin(), wanted.end(), [](const Wanted& a, const Wanted& b) {
    return !isCompletionMarker(a.path) && isCompletionMarker(b.path);
  });
  for (auto it = record.begin(); it != record.end();) {
    const auto local = identityOf(options.tree / it->first);
    if (!atOrigin.contains(it->first) && local == it->second) {
      std::error_code ignored;
      std::filesystem::remove(options.tree / it->first, ignored);
      ++progress.removedFiles;
      it = record.erase(it);
    } else {
      ++it;
    }
  }
  report(progress);

  std::error_code error;
  std::filesystem::create_directories(options.staging, error);
  if (error)
    return unavailable("cannot create " + options.staging.string() + ": " + error.message());
  // The files, then the markers once every file is in place.
  const size_t markers =
      static_cast<size_t>(std::find_if(wanted.begin(), wanted.end(),
                                       [](const Wanted& w) { return isCompletionMarker(w.path); }) -
                          wanted.begin());
  Fetches fetches(origin, options, stop, progress, record, report);
  Status result = fetches.run(wanted, 0, markers);
  if (result.isOk()) result = fetches.run(wanted, markers, wanted.size());
  std::vector<OriginEntry> entries;
  for (const auto& [path, identity] : record) entries.push_back({path, identity});
  // What was restored is recorded even when the restore failed; its failure is the one to tell.
  const Status kept = writeDrainRecord(options.recordFile, entries);
  std::filesystem::remove_all(options.staging, error);
  GRANARY_RETURN_IF_ERROR(result);
  GRANARY_RETURN_IF_ERROR(kept);
  report(progress);
  return progress;
}

}  // namespace granary::checkpoint
