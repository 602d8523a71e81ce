#include "cache-node/csi/checkpoint_volumes.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cache-node/csi/mount_table.h"
#include "common/files.h"
#include "common/log.h"
#include "common/quantity.h"

namespace granary::cache {
namespace {

constexpr const char* kRecordName = "volume";

std::vector<std::string> splitTabs(const std::string& line) {
  std::vector<std::string> fields;
  for (size_t start = 0;;) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab - start));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

// Whether the target is the root of a mount: bound already (a repeated publish, or one from
// before a restart), whatever file system the tree is on.
bool isMountRoot(const std::filesystem::path& target) {
  struct statx info {};
  return ::statx(AT_FDCWD, target.c_str(), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &info) == 0 &&
         (info.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
         (info.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

Status bindReadWrite(const std::filesystem::path& tree, const std::filesystem::path& target) {
  if (isMountRoot(target)) return Status::ok();
  std::error_code error;
  std::filesystem::create_directories(target, error);
  if (error) return unavailable("cannot create " + target.string() + ": " + error.message());
  if (::mount(tree.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return unavailable("cannot bind " + tree.string() + " to " + target.string() + ": " +
                       std::strerror(errno));
  return Status::ok();
}

// The home of a namespace's volume of `uri`.
std::filesystem::path homeOf(const std::filesystem::path& root, const std::string& ns,
                             const std::string& uri) {
  return root / checkpoint::homeName(ns + "\t" + uri);
}

// "restoring checkpoints from URI: 3/40 files, 1.2Gi/80Gi".
std::string restoringLine(const std::string& uri, const checkpoint::RestoreProgress& p) {
  return "restoring checkpoints from " + uri + ": " + std::to_string(p.files) + "/" +
         std::to_string(p.totalFiles) + " files, " + formatByteSize(ByteSize{p.bytes}) + "/" +
         formatByteSize(ByteSize{p.totalBytes}) + "; the kubelet retries until the restore is done";
}

}  // namespace

struct CheckpointVolumes::Volume {
  VolumeRecord record;
  std::filesystem::path home;
  std::set<std::filesystem::path> targets;
  std::unique_ptr<checkpoint::CheckpointVolume> open;
  std::optional<Status> failed;          // the last restore's error
  checkpoint::RestoreProgress progress;  // of the restore under way
  std::jthread restoring;                // last: joined before the rest goes
};

std::string formatVolumeRecord(const VolumeRecord& r) {
  std::string line = r.ns + "\t" + r.source.uri + "\t" + r.source.endpoint + "\t" +
                     r.source.region + "\t" + std::to_string(r.bandwidthBytesPerSecond) + "\t" +
                     (r.needsCredentials ? "credentials" : "none");
  for (const auto& [key, value] : r.source.options) line += "\t" + key + "=" + value;
  return line;
}

std::optional<VolumeRecord> parseVolumeRecord(const std::string& text) {
  const std::string line = text.substr(0, text.find('\n'));
  const std::vector<std::string> fields = splitTabs(line);
  if (fields.size() < 6 || fields[1].empty()) return std::nullopt;
  VolumeRecord r;
  r.ns = fields[0];
  r.source.uri = fields[1];
  r.source.endpoint = fields[2];
  r.source.region = fields[3];
  try {
    r.bandwidthBytesPerSecond = std::stoll(fields[4]);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (fields[5] != "credentials" && fields[5] != "none") return std::nullopt;
  r.needsCredentials = fields[5] == "credentials";
  for (size_t i = 6; i < fields.size(); ++i) {
    const size_t equals = fields[i].find('=');
    if (equals == std::string::npos) return std::nullopt;
    r.source.options[fields[i].substr(0, equals)] = fields[i].substr(equals + 1);
  }
  return r;
}

CheckpointVolumes::CheckpointVolumes(CheckpointVolumesOptions options, Clock& clock)
    : options_(std::move(options)), clock_(clock) {
  openRecorded();
}

CheckpointVolumes::~CheckpointVolumes() {
  std::map<std::filesystem::path, std::shared_ptr<Volume>> volumes;
  {
    MutexLock lock(mutex_);
    volumes.swap(volumes_);
  }
  volumes.clear();  // each restore stopped and joined outside the lock it ends under
}

void CheckpointVolumes::openRecorded() {
  std::error_code error;
  MutexLock lock(mutex_);
  for (const auto& entry : std::filesystem::directory_iterator(options_.root, error)) {
    std::ifstream in(entry.path() / kRecordName);
    std::stringstream text;
    text << in.rdbuf();
    const auto record = parseVolumeRecord(text.str());
    if (!record) continue;
    auto volume = std::make_shared<Volume>();
    volume->record = *record;
    volume->record.source.ns = record->ns;
    volume->home = entry.path();
    if (!record->needsCredentials)
      startRestoreLocked(*volume, volume->record.source, record->bandwidthBytesPerSecond);
    volumes_[entry.path()] = std::move(volume);
  }
}

void CheckpointVolumes::startRestoreLocked(
    Volume& volume, const SourceSpec& source, int64_t bandwidth,
    const std::vector<std::pair<std::string, std::string>>& peers) {
  if (volume.restoring.joinable()) volume.restoring.join();  // one that ended
  volume.failed.reset();
  volume.progress = {};
  std::shared_ptr<checkpoint::CopyTargets> copies =
      options_.copyTargets ? options_.copyTargets(volume.record.ns, source.uri) : nullptr;
  checkpoint::VolumeOptions opening{
      .home = volume.home, .bandwidthBytesPerSecond = bandwidth, .copies = std::move(copies)};
  if (options_.peerTrees && !peers.empty())
    opening.peers = options_.peerTrees(volume.record.ns, source.uri, peers);
  volume.restoring =
      std::jthread([this, &volume, source, opening = std::move(opening)](std::stop_token stop) {
        auto opened =
            checkpoint::CheckpointVolume::open(source, options_.origins, opening, clock_, stop,
                                               [&](const checkpoint::RestoreProgress& p) {
                                                 MutexLock lock(mutex_);
                                                 volume.progress = p;
                                               });
        const Logger log("checkpoints");
        MutexLock lock(mutex_);
        if (opened.isOk()) {
          volume.open = std::move(*opened);
          const auto& r = volume.open->restored();
          log.info("checkpoint volume restored", {{"namespace", volume.record.ns},
                                                  {"uri", volume.record.source.uri},
                                                  {"files", r.files},
                                                  {"bytes", r.bytes},
                                                  {"peerFiles", r.peerFiles},
                                                  {"peerBytes", r.peerBytes},
                                                  {"localFiles", r.localFiles}});
        } else {
          volume.failed = opened.status().withContext("volumeAttributes.checkpoints");
          log.warn("cannot restore a checkpoint volume", {{"namespace", volume.record.ns},
                                                          {"uri", volume.record.source.uri},
                                                          {"error", *volume.failed}});
        }
        restored_.notify_all();
      });
}

Status CheckpointVolumes::publish(const CheckpointPublication& p,
                                  std::chrono::steady_clock::time_point deadline) {
  const std::filesystem::path home = homeOf(options_.root, p.podNamespace, p.source.uri);
  std::shared_ptr<Volume> held;  // released after the lock: a volume swept meanwhile ends here
  MutexLock lock(mutex_);
  auto& slot = volumes_[home];
  if (!slot) {
    slot = std::make_shared<Volume>();
    slot->home = home;
  }
  held = slot;
  Volume& volume = *held;
  if (!volume.open && (volume.failed || !volume.restoring.joinable())) {
    volume.record = {.ns = p.podNamespace,
                     .source = p.source,
                     .bandwidthBytesPerSecond = p.bandwidthBytesPerSecond,
                     .needsCredentials = !p.source.accessKeyId.empty()};
    volume.record.source.accessKeyId = volume.record.source.secretAccessKey =
        volume.record.source.sessionToken = Secret();
    std::error_code error;
    std::filesystem::create_directories(home, error);
    if (error) return unavailable("cannot create " + home.string() + ": " + error.message());
    GRANARY_RETURN_IF_ERROR(
        writeFileDurably((home / kRecordName).string(), formatVolumeRecord(volume.record) + "\n"));
    startRestoreLocked(volume, p.source, p.bandwidthBytesPerSecond, p.peers);
  }
  while (!volume.open && !volume.failed && std::chrono::steady_clock::now() < deadline)
    restored_.wait_until(lock, deadline);
  if (volume.failed) return *volume.failed;
  if (!volume.open) return unavailable(restoringLine(p.source.uri, volume.progress));
  GRANARY_RETURN_IF_ERROR(bindReadWrite(volume.open->tree(), p.targetPath));
  volume.targets.insert(p.targetPath);
  targets_[p.targetPath] = home;
  return Status::ok();
}

bool CheckpointVolumes::holds(const std::filesystem::path& target) const {
  MutexLock lock(mutex_);
  return targets_.contains(target);
}

Status CheckpointVolumes::unpublish(const std::filesystem::path& target) {
  GRANARY_RETURN_IF_ERROR(unbindTarget(target));
  MutexLock lock(mutex_);
  const auto it = targets_.find(target);
  if (it == targets_.end()) return Status::ok();
  if (const auto volume = volumes_.find(it->second); volume != volumes_.end())
    volume->second->targets.erase(target);
  targets_.erase(it);
  return Status::ok();
}

Result<std::shared_ptr<CheckpointVolumes::Volume>> CheckpointVolumes::opened(
    const std::string& ns, const std::string& uri) const {
  MutexLock lock(mutex_);
  const auto it = volumes_.find(homeOf(options_.root, ns, uri));
  if (it == volumes_.end() || !it->second->open)
    return failedPrecondition("the checkpoint volume of " + uri + " in namespace " + ns +
                              " is not open on this node");
  return it->second;
}

Status CheckpointVolumes::placeCopy(const std::string& ns, const std::string& uri,
                                    const checkpoint::PeerCopy& copy,
                                    const std::function<Status(int fd)>& fill) {
  GRANARY_ASSIGN_OR_RETURN(const auto volume, opened(ns, uri));
  return volume->open->placeCopy(copy, fill);
}

Status CheckpointVolumes::takeNews(const std::string& ns, const std::string& uri,
                                   const checkpoint::CopyNews& news) {
  GRANARY_ASSIGN_OR_RETURN(const auto volume, opened(ns, uri));
  return volume->open->takeNews(news);
}

Result<std::vector<checkpoint::PeerFile>> CheckpointVolumes::listing(const std::string& ns,
                                                                     const std::string& uri) const {
  GRANARY_ASSIGN_OR_RETURN(const auto volume, opened(ns, uri));
  return volume->open->listing();
}

Status CheckpointVolumes::readFile(const std::string& ns, const std::string& uri,
                                   const checkpoint::PeerFile& file,
                                   const std::function<Status(std::string_view)>& each) const {
  GRANARY_ASSIGN_OR_RETURN(const auto volume, opened(ns, uri));
  return volume->open->readFile(file, each);
}

Status CheckpointVolumes::release(const std::string& ns, const std::string& uri,
                                  const std::string& writer) {
  GRANARY_ASSIGN_OR_RETURN(const auto volume, opened(ns, uri));
  volume->open->release(writer);
  return Status::ok();
}

std::vector<CheckpointVolumeState> CheckpointVolumes::states() const {
  MutexLock lock(mutex_);
  std::vector<CheckpointVolumeState> out;
  for (const auto& [_, v] : volumes_) {
    CheckpointVolumeState state{.ns = v->record.ns,
                                .uri = v->record.source.uri,
                                .pods = static_cast<int>(v->targets.size())};
    const checkpoint::DiskRoom room = checkpoint::roomOf(v->home);
    state.diskFreeBytes = room.free;
    state.diskFull = room.full();
    if (v->open)
      state.drain = v->open->status();
    else if (v->restoring.joinable() && !v->failed)
      state.restoring = v->progress;
    out.push_back(std::move(state));
  }
  return out;
}

void CheckpointVolumes::makeRoom() {
  std::vector<std::shared_ptr<Volume>> open;
  {
    MutexLock lock(mutex_);
    for (const auto& [_, v] : volumes_)
      if (v->open) open.push_back(v);
  }
  for (const auto& v : open) {
    const int64_t freed = v->open->makeRoom();
    if (freed > 0)
      Logger("checkpoints")
          .info("dropped checkpoint files the origin holds to make room on the disk",
                {{"namespace", v->record.ns}, {"uri", v->record.source.uri}, {"bytes", freed}});
  }
}

void CheckpointVolumes::sweep() {
  std::vector<std::shared_ptr<Volume>> closed;
  {
    MutexLock lock(mutex_);
    for (auto it = volumes_.begin(); it != volumes_.end();) {
      const Volume& v = *it->second;
      // A recorded volume waiting for its credentials stays, to be reported.
      const bool idle =
          v.targets.empty() && (v.open ? v.open->status().drained : v.failed.has_value());
      if (!idle) {
        ++it;
        continue;
      }
      // Its record goes too: a restart has nothing of it to resume (the tree stays, for the
      // job's next pods here, whose publish records it again).
      std::error_code ignored;
      std::filesystem::remove(v.home / kRecordName, ignored);
      closed.push_back(std::move(it->second));
      it = volumes_.erase(it);
    }
  }
  closed.clear();  // outside the lock: a restore that ended takes it as it returns
}

}  // namespace granary::cache
