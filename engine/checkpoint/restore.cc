#include "engine/checkpoint/restore.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <thread>

#include "common/errno_status.h"
#include "common/owned_fd.h"
#include "common/thread_annotations.h"
#include "engine/checkpoint/drain_plan.h"
#include "engine/checkpoint/drain_record.h"
#include "engine/checkpoint/origin_writer.h"
#include "engine/checkpoint/tree_watch.h"

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

// Reads `object` whole into `staged`, then renames it to its place in the tree. `arrived` is
// told of each piece.
Status fetch(cache::Origin& origin, const cache::OriginObject& object,
             const RestoreOptions& options, const std::filesystem::path& staged,
             std::stop_token stop, const std::function<void(int64_t)>& arrived) {
  OwnedFd out(::open(staged.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return errnoStatus(errno, "cannot create " + staged.string());
  for (int64_t at = 0; at < object.size;) {
    if (stop.stop_requested()) return cancelled("the restore was stopped");
    GRANARY_ASSIGN_OR_RETURN(
        const std::string piece,
        origin.read(object.path, at, std::min(kPiece, object.size - at), object.etag));
    if (piece.empty())
      return failedPrecondition(object.path + " at the origin is shorter than listed");
    GRANARY_RETURN_IF_ERROR(writeAll(out.get(), piece, staged.string()));
    at += static_cast<int64_t>(piece.size());
    arrived(static_cast<int64_t>(piece.size()));
  }
  if (::fsync(out.get()) != 0) return errnoStatus(errno, "cannot sync " + staged.string());
  const std::filesystem::path target = options.tree / object.path;
  std::error_code error;
  std::filesystem::create_directories(target.parent_path(), error);
  if (error)
    return unavailable("cannot create " + target.parent_path().string() + ": " + error.message());
  std::filesystem::rename(staged, target, error);
  if (error) return unavailable("cannot place " + target.string() + ": " + error.message());
  return Status::ok();
}

// Fetches objects [begin, end) of `wanted`, a few at a time, into the tree, entering each in
// `record`; the first failure ends it (the fetches under way finish).
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

  Status run(const std::vector<const cache::OriginObject*>& wanted, size_t begin, size_t end) {
    std::atomic<size_t> next = begin;
    {
      std::vector<std::jthread> fetchers;
      const size_t count = std::min(end - begin, kFetchesAtOnce);
      for (size_t k = 0; k < count; ++k)
        fetchers.emplace_back([&] {
          for (size_t at = next++; at < end && failed().isOk(); at = next++)
            fetchOne(*wanted[at], at);
        });
    }
    return failed();
  }

 private:
  static constexpr size_t kFetchesAtOnce = 4;

  void fetchOne(const cache::OriginObject& o, size_t index) {
    const Status s = fetch(origin_, o, options_, options_.staging / std::to_string(index), stop_,
                           [&](int64_t bytes) {
                             MutexLock lock(mutex_);
                             progress_.bytes += bytes;
                             report_(progress_);
                           });
    MutexLock lock(mutex_);
    if (!s.isOk()) {
      if (failed_.isOk()) failed_ = s;
      return;
    }
    ++progress_.files;
    if (const auto placed = identityOf(options_.tree / o.path)) record_[o.path] = *placed;
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

// What the origin holds, markers last (each group in key order).
Result<std::vector<cache::OriginObject>> originFiles(cache::Origin& origin) {
  std::vector<cache::OriginObject> files;
  GRANARY_RETURN_IF_ERROR(origin.list([&](std::vector<cache::OriginObject>&& batch) {
    for (auto& o : batch)
      if (!o.path.starts_with(std::string(kStagingDirectory) + "/")) files.push_back(std::move(o));
    return Status::ok();
  }));
  std::stable_sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
    return !isCompletionMarker(a.path) && isCompletionMarker(b.path);
  });
  return files;
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

  RestoreProgress progress;
  std::map<std::string, const cache::OriginObject*> atOrigin;
  std::vector<const cache::OriginObject*> wanted;
  for (const cache::OriginObject& o : files) {
    atOrigin[o.path] = &o;
    const auto local = identityOf(options.tree / o.path);
    const auto held = record.find(o.path);
    // The node's copy wins unless it is the version the origin had and the origin changed since.
    const bool unchangedHere = local && held != record.end() && held->second == *local;
    if (local && !(unchangedHere && local->size != o.size)) {
      ++progress.localFiles;
      continue;
    }
    wanted.push_back(&o);
    ++progress.totalFiles;
    progress.totalBytes += o.size;
  }
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
  const size_t markers = static_cast<size_t>(
      std::find_if(wanted.begin(), wanted.end(),
                   [](const cache::OriginObject* o) { return isCompletionMarker(o->path); }) -
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
