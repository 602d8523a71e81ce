#include "cache-node/csi/mount_table.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include "common/log.h"
#include "engine/standalone.h"

namespace granary::cache {

bool isMountPoint(const std::filesystem::path& path) {
  if (isStaleMount(path)) return true;
  struct stat self, parent;
  if (::stat(path.c_str(), &self) != 0) return false;
  if (::stat(path.parent_path().c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev || self.st_ino == parent.st_ino;
}

namespace {

std::filesystem::path normalRoot(const std::filesystem::path& root) {
  std::filesystem::path normal = std::filesystem::absolute(root).lexically_normal();
  return normal.has_filename() ? normal : normal.parent_path();
}

// Until `deadline`, waits for this node's share of the dataset to settle (nothing left to warm).
Status waitWarm(DatasetCache& cache, std::chrono::steady_clock::time_point deadline) {
  const auto left = std::max(std::chrono::steady_clock::duration::zero(),
                             deadline - std::chrono::steady_clock::now());
  const DatasetState state =
      cache.waitSettled(std::chrono::duration_cast<std::chrono::milliseconds>(left));
  if (phaseSettled(state.phase)) return Status::ok();
  return unavailable(
      "this node's share of the dataset is not warm yet, and the volume asks for "
      "it first (warmFirst: a TrainingJob's warmPolicy BeforeStart): " +
      progressLine(cache.key(), state) + "; the kubelet asks again");
}

}  // namespace

MountTable::MountTable(CacheEngine& engine, MountTableOptions options, ReaderAccounting& accounting)
    : engine_(engine), options_(std::move(options)), accounting_(accounting) {
  const Logger log("mount");
  options_.root = normalRoot(options_.root);
  bool awaitKeeper = false;
  const KeeperClient& keeper = options_.keeper;
  if (!keeper.socket().empty()) {
    // A keeper listening now holds what a previous process of this node handed it; one that
    // starts later (its container after this one) holds nothing yet.
    auto kept = keeper.kept();
    if (kept.isOk()) {
      for (auto& [point, fd] : *kept) kept_[point] = std::move(fd);
      log.info("mount keeper reached", {{"kept_mounts", kept_.size()}});
    } else if (keeper.listening()) {  // there, but it refused (a wrong token, another protocol)
      log.warn("the mount keeper refused: dataset mounts end with this process",
               {{"error", kept.status()}});
    } else {
      awaitKeeper = true;
    }
  }
  // The dataset mounts under the root: the kept ones wait for their datasets; dead ones go.
  std::set<std::filesystem::path> mounted;
  for (const auto& mount : currentMounts()) {
    if (mount.type != "fuse.granary" || !mount.point.starts_with(options_.root.string() + "/"))
      continue;
    mounted.insert(mount.point);
    if (!kept_.contains(mount.point) && cleanStaleMount(mount.point))
      log.info("stale mount removed", {{"mountpoint", mount.point}});
  }
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (mounted.contains(it->first)) {
      ++it;
      continue;
    }
    (void)keeper.drop(it->first);  // its mount is gone
    it = kept_.erase(it);
  }
  std::ifstream records(recordsFile());
  for (std::string line; std::getline(records, line);) {
    if (auto record = parseRecord(line)) {
      const Publication& p = record->publication;
      accounting_.namePod(p.podUid, p.podNamespace, p.podName);
      published_[p.targetPath] = std::move(*record);
    }
  }
  engine_.onCreated([this](const std::shared_ptr<DatasetCache>& cache) {
    MutexLock lock(mutex_);
    repairLocked(cache);
  });
  MutexLock lock(mutex_);
  saveRecordsLocked();  // counts the readers of each generation
  for (const auto& cache : engine_.datasets()) repairLocked(cache);
  if (awaitKeeper) {
    keeperAwaited_ = true;
    keeperWait_ = std::jthread([this](std::stop_token stop) { this->awaitKeeper(stop); });
  }
}

void MountTable::awaitKeeper(std::stop_token stop) {
  const Logger log("mount");
  Clock& clock = accounting_.clock();
  const auto start = clock.monoNow();
  while (!options_.keeper.listening()) {
    if (clock.monoNow() - start >= options_.keeperStartWait) {
      MutexLock lock(mutex_);
      keeperAwaited_ = false;
      // Recovery is on, but nothing holds the mounts: say how to have it, or to turn it off.
      log.warn("no mount keeper: dataset mounts end with this process while none listens",
               {{"keeper_socket", options_.keeper.socket().string()},
                {"waited", options_.keeperStartWait},
                {"fix", "run granary-cache-node --serve-mount-keeper " +
                            options_.keeper.socket().string() + ", or set mountKeeper: false"}});
      return;
    }
    if (!clock.sleepFor(std::chrono::milliseconds(100), stop)) return;
  }
  MutexLock lock(mutex_);
  keeperAwaited_ = false;
  int64_t handedOver = 0;
  for (auto& [point, fs] : mounts_)
    if (!fs->detached() && fs->serving() && handToKeeperLocked(point, *fs)) ++handedOver;
  log.info("mount keeper reached",
           {{"waited", clock.monoNow() - start}, {"mounts_handed_over", handedOver}});
}

void MountTable::handOver() {
  keeperWait_ = {};
  engine_.onCreated(nullptr);
  MutexLock lock(mutex_);
  mounts_.clear();  // a kept mount stays mounted; one the keeper does not hold ends
}

MountTable::~MountTable() {
  keeperWait_ = {};  // stopped and joined before the table goes
  engine_.onCreated(nullptr);
  MutexLock lock(mutex_);
  std::vector<std::filesystem::path> kept;
  for (auto& [point, fs] : mounts_) {
    if (fs->detached()) kept.push_back(point);
    fs.reset();  // stops serving; a kept mount stays mounted
  }
  if (kept.empty()) return;
  Clock& clock = accounting_.clock();
  const auto deadline = clock.monoNow() + kKeeperStopGrace;
  while (options_.keeper.listening()) {
    if (clock.monoNow() >= deadline) return;  // the keeper holds them
    clock.sleepFor(std::chrono::milliseconds(100), {});
  }
  for (const auto& point : kept) {
    if (::umount2(point.c_str(), MNT_DETACH) == 0)
      Logger("mount").info("the keeper is gone: dataset unmounted",
                           {{"mountpoint", point.string()}});
  }
}

Result<std::filesystem::path> MountTable::datasetMountLocked(
    const std::shared_ptr<DatasetCache>& cache) {
  const Logger log("mount");
  const DatasetKey& key = cache->key();
  const std::filesystem::path point = mountpointOf(key);
  if (auto it = mounts_.find(point); it != mounts_.end() && it->second->serving()) return point;
  if (auto kept = kept_.extract(point)) {
    auto adopted = DatasetFilesystem::adopt(cache, kept.mapped().release(), point, &accounting_,
                                            mountOptionsFor(point));
    if (adopted.isOk()) {
      (*adopted)->detach();  // the keeper still holds it
      log.info("dataset mount adopted", {{"dataset", key.label()}, {"mountpoint", point.string()}});
      mounts_[point] = std::move(*adopted);
      return point;
    }
    log.warn("cannot adopt a kept dataset mount; mounting it again",
             {{"dataset", key.label()}, {"error", adopted.status()}});
    (void)options_.keeper.drop(point);
    ::umount2(point.c_str(), MNT_DETACH);
  }
  cleanStaleMount(point);
  GRANARY_ASSIGN_OR_RETURN(
      auto fs, DatasetFilesystem::mount(cache, point, &accounting_, mountOptionsFor(point)));
  if (!options_.keeper.socket().empty()) handToKeeperLocked(point, *fs);
  log.info("dataset mounted", {{"dataset", key.label()}, {"mountpoint", point.string()}});
  mounts_[point] = std::move(fs);
  return point;
}

bool MountTable::handToKeeperLocked(const std::filesystem::path& point, DatasetFilesystem& fs) {
  const Status kept = options_.keeper.keep(point, fs.fd());
  if (kept.isOk()) {
    fs.detach();
    return true;
  }
  if (!keeperAwaited_)  // an awaited keeper is handed the mount when it comes
    Logger("mount").warn("the mount keeper did not take the mount: it ends with this process",
                         {{"mountpoint", point.string()}, {"error", kept}});
  return false;
}

Status MountTable::bindLocked(const std::filesystem::path& source, const Publication& p) {
  cleanStaleMount(p.targetPath);
  if (isMountPoint(p.targetPath)) return Status::ok();  // published before
  std::error_code error;
  std::filesystem::create_directories(p.targetPath, error);
  if (error) return unavailable("cannot create " + p.targetPath.string() + ": " + error.message());
  if (::mount(source.c_str(), p.targetPath.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, p.targetPath.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) !=
          0) {
    const int e = errno;
    ::umount2(p.targetPath.c_str(), MNT_DETACH);
    return unavailable("cannot bind " + source.string() + " to " + p.targetPath.string() + ": " +
                       std::strerror(e));
  }
  return Status::ok();
}

void MountTable::repairLocked(const std::shared_ptr<DatasetCache>& cache) {
  const DatasetKey& key = cache->key();
  const auto isOfCache = [&](const PublicationRecord& record) {
    return record.servedNamespace == key.ns && record.servedName == key.name &&
           record.generation == key.generation;
  };
  bool wanted = kept_.contains(mountpointOf(key));
  for (const auto& [_, record] : published_) wanted = wanted || isOfCache(record);
  if (!wanted) return;
  const Logger log("mount");
  auto source = datasetMountLocked(cache);
  if (!source.isOk()) {
    log.warn("cannot mount a dataset again",
             {{"dataset", key.label()}, {"error", source.status()}});
    return;
  }
  for (auto it = published_.begin(); it != published_.end();) {
    const Publication& p = it->second.publication;
    if (!isOfCache(it->second) || !isStaleMount(p.targetPath)) {
      ++it;
      continue;
    }
    // The pod's running containers keep their copy of the dead mount: they fail until restarted.
    log.warn("a pod's view of the dataset ended: its reads fail until it is restarted",
             {{"dataset", key.label()},
              {"pod", p.podNamespace + "/" + p.podName},
              {"fix", "restart the pod (a TrainingJob's workers are restarted by the operator)"}});
    if (options_.cutOff)
      options_.cutOff->add({.dataset = p.datasetNamespace + "/" + p.datasetName,
                            .podNamespace = p.podNamespace,
                            .podName = p.podName,
                            .podUid = p.podUid,
                            .since = std::chrono::system_clock::now()});
    if (Status bound = bindLocked(*source / it->second.path, p); bound.isOk()) {
      log.info("volume repaired", {{"dataset", key.label()},
                                   {"pod", p.podNamespace + "/" + p.podName},
                                   {"target", p.targetPath.string()}});
      ++it;
    } else {
      log.warn("cannot repair a volume", {{"target", p.targetPath.string()}, {"error", bound}});
      it = published_.erase(it);
    }
  }
  saveRecordsLocked();
}

void MountTable::saveRecordsLocked() const {
  if (options_.generationReaders) {
    std::map<GenerationReaders::Generation, int> counts;
    for (const auto& [_, record] : published_)
      ++counts[{record.servedNamespace, record.servedName, record.generation}];
    options_.generationReaders->set(std::move(counts));
  }
  const std::filesystem::path file = recordsFile();
  std::error_code error;
  std::filesystem::create_directories(options_.root, error);
  {
    std::ofstream out(file.string() + ".new", std::ios::trunc);
    for (const auto& [_, record] : published_) out << formatRecord(record) << "\n";
  }
  std::filesystem::rename(file.string() + ".new", file, error);
  if (error)
    Logger("mount").warn("cannot record the published volumes",
                         {{"file", file.string()}, {"error", error.message()}});
}

Status MountTable::publish(const Publication& p,
                           std::chrono::steady_clock::time_point warmDeadline) {
  bool started = false;  // published before: its pod runs, and is not held back again
  {
    // Published and live: the kubelet publishes every volume again now and then
    // (requiresRepublish), which changes nothing.
    MutexLock lock(mutex_);
    started = published_.contains(p.targetPath);
    if (started && !isStaleMount(p.targetPath) && isMountPoint(p.targetPath)) return Status::ok();
  }
  auto served = engine_.resolve({p.datasetNamespace, p.datasetName, 0, ""}, p.version);
  if (!served.isOk()) {
    // "dataset <ns>/<name> is not on this node", or which source a view lacks.
    return notFound(served.status().message() + " (" + engine_.nodeName() +
                    ") yet; the operator ensures it where a job's workers run, and the Dataset's "
                    "status says why it is not");
  }
  const DatasetKey& key = served->cache->key();
  if (p.warmFirst && !started) GRANARY_RETURN_IF_ERROR(waitWarm(*served->cache, warmDeadline));
  accounting_.namePod(p.podUid, p.podNamespace, p.podName);
  MutexLock lock(mutex_);
  GRANARY_ASSIGN_OR_RETURN(const auto point, datasetMountLocked(served->cache));
  // The dataset's file system has no symbolic links: a directory of it stays within it.
  const std::filesystem::path source = point / served->path;
  if (std::error_code error; !std::filesystem::is_directory(source, error)) {
    return notFound("Dataset " + p.datasetNamespace + "/" + p.datasetName + ": \"" + served->path +
                    "\" is not a directory of " + key.label());
  }
  GRANARY_RETURN_IF_ERROR(bindLocked(source, p));
  if (!published_.contains(p.targetPath)) {
    published_[p.targetPath] = {p, key.generation, key.ns, key.name, served->path};
    saveRecordsLocked();
    Logger("mount").info("volume published", {{"dataset", key.label()},
                                              {"pod", p.podNamespace + "/" + p.podName},
                                              {"target", p.targetPath.string()}});
  }
  return Status::ok();
}

Status unbindTarget(const std::filesystem::path& target) {
  if (::umount2(target.c_str(), 0) != 0 && errno != EINVAL && errno != ENOENT) {
    if (errno != EBUSY || ::umount2(target.c_str(), MNT_DETACH) != 0)
      return unavailable("cannot unmount " + target.string() + ": " + std::strerror(errno));
  }
  std::error_code error;
  std::filesystem::remove(target, error);  // an empty directory, or nothing
  if (error && error != std::errc::no_such_file_or_directory)
    return unavailable("cannot remove " + target.string() + ": " + error.message());
  return Status::ok();
}

Status MountTable::unpublish(const std::filesystem::path& targetPath) {
  MutexLock lock(mutex_);
  // Unmounting asks nothing of the daemon, so it works on a view whose dataset waits for its
  // process.
  GRANARY_RETURN_IF_ERROR(unbindTarget(targetPath));
  const auto published = published_.find(targetPath);
  if (published == published_.end()) return Status::ok();
  const PublicationRecord& record = published->second;
  // The pod ended.
  accounting_.endPod(record.servedNamespace + "/" + record.servedName, record.publication.podUid);
  if (options_.cutOff) options_.cutOff->endPod(record.publication.podUid);
  published_.erase(published);
  saveRecordsLocked();
  return Status::ok();
}

}  // namespace granary::cache
