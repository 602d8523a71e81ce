// The node's dataset mounts and the pods' views of them. Each dataset generation a pod asks for
// is mounted once under the node's mount root (root/namespace/name/generation); each pod gets a
// read-only bind mount of it at its volume's target path.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "cache-node/csi/publication.h"
#include "cache-node/engine.h"
#include "cache-node/mount/dataset_fs.h"

namespace granary::cache {

class MountTable {
 public:
  // Removes stale dataset mounts under `root` that a previous process left.
  MountTable(CacheEngine& engine, std::filesystem::path root, ReaderAccounting& accounting);
  // Stops serving the dataset mounts and unmounts them.
  ~MountTable();

  // Mounts the newest generation of the publication's dataset (once) and bind-mounts it
  // read-only at the target. Idempotent. NotFound while the dataset is not on this node;
  // Unavailable when a mount fails.
  Status publish(const Publication& publication);
  // Removes a pod's bind mount and its directory. Idempotent: a missing target is fine.
  Status unpublish(const std::filesystem::path& targetPath);

 private:
  // The dataset's mount on this node, mounted if needed.
  Result<std::filesystem::path> datasetMountLocked(const std::shared_ptr<DatasetCache>& cache);

  CacheEngine& engine_;
  std::filesystem::path root_;
  ReaderAccounting& accounting_;
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<DatasetFilesystem>> mounts_;  // by "ns/name/generation"
};

// True when `path` is the root of a mount (its device differs from its parent's).
bool isMountPoint(const std::filesystem::path& path);

}  // namespace granary::cache
