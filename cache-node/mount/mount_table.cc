#include "cache-node/mount/mount_table.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace granary::cache {

bool isMountPoint(const std::filesystem::path& path) {
  if (isStaleMount(path)) return true;
  struct stat self, parent;
  if (::stat(path.c_str(), &self) != 0) return false;
  if (::stat(path.parent_path().c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev || self.st_ino == parent.st_ino;
}

MountTable::MountTable(CacheEngine& engine, std::filesystem::path root,
                       ReaderAccounting& accounting)
    : engine_(engine), root_(std::move(root)), accounting_(accounting) {
  // Dataset mounts a previous process left without a daemon ("transport endpoint is not
  // connected") go at start.
  for (const auto& mount : currentMounts()) {
    if (mount.type == "fuse.granary" && mount.point.starts_with(root_.string()) &&
        cleanStaleMount(mount.point))
      Logger("mount").info("stale mount removed", {{"mountpoint", mount.point}});
  }
}

MountTable::~MountTable() = default;

Result<std::filesystem::path> MountTable::datasetMountLocked(
    const std::shared_ptr<DatasetCache>& cache) {
  const DatasetKey& key = cache->key();
  const std::string id = key.ns + "/" + key.name + "/" + std::to_string(key.generation);
  if (auto it = mounts_.find(id); it != mounts_.end() && it->second->serving())
    return it->second->mountpoint();
  const std::filesystem::path mountpoint =
      root_ / key.ns / key.name / std::to_string(key.generation);
  cleanStaleMount(mountpoint);
  GRANARY_ASSIGN_OR_RETURN(auto fs, DatasetFilesystem::mount(cache, mountpoint, &accounting_));
  Logger("mount").info("dataset mounted",
                       {{"dataset", key.label()}, {"mountpoint", mountpoint.string()}});
  mounts_[id] = std::move(fs);
  return mountpoint;
}

Status MountTable::publish(const Publication& p) {
  auto cache = engine_.find({p.datasetNamespace, p.datasetName, 0, ""});
  if (!cache.isOk()) {
    return notFound("Dataset " + p.datasetNamespace + "/" + p.datasetName + " is not on node " +
                    engine_.nodeName() + " yet; the operator ensures it where a job's workers run");
  }
  accounting_.namePod(p.podUid, p.podNamespace, p.podName);
  std::lock_guard lock(mutex_);
  GRANARY_ASSIGN_OR_RETURN(const auto source, datasetMountLocked(*cache));
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
  Logger("mount").info("volume published", {{"dataset", (*cache)->key().label()},
                                            {"pod", p.podNamespace + "/" + p.podName},
                                            {"target", p.targetPath.string()}});
  return Status::ok();
}

Status MountTable::unpublish(const std::filesystem::path& targetPath) {
  if (isMountPoint(targetPath) && ::umount2(targetPath.c_str(), 0) != 0) {
    if (errno != EBUSY || ::umount2(targetPath.c_str(), MNT_DETACH) != 0)
      return unavailable("cannot unmount " + targetPath.string() + ": " + std::strerror(errno));
  }
  std::error_code error;
  std::filesystem::remove(targetPath, error);  // an empty directory, or nothing
  if (error && error != std::errc::no_such_file_or_directory)
    return unavailable("cannot remove " + targetPath.string() + ": " + error.message());
  return Status::ok();
}

}  // namespace granary::cache
