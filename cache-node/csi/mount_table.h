// The node's dataset mounts and the pods' views of them. Each dataset generation a pod asks for
// is mounted once under the node's mount root (root/namespace/name/generation); each pod gets a
// read-only bind mount of it at its volume's target path.
//
// Restarts. With a mount keeper (mount_keeper.h), each dataset mount's FUSE connection is handed
// to the keeper, and a table in a new process adopts the connections the keeper held as soon as
// their datasets are ensured again: the mounts, and the pods' bind mounts of them, never go away
// and their readers only wait. Without one (or when the keeper went too), the mounts a previous
// process left are dead; they are removed at start, and the pods' views, recorded under the root,
// are bound again to fresh mounts once their datasets are ensured.
//
// The keeper at start. In a pod the keeper is a container that may start after the node's, so a
// keeper not listening yet is waited for, up to keeperStartWait, without holding up the node:
// mounts made meanwhile are handed to it when it comes. What is true is logged once: "mount
// keeper reached", or, when the wait ends without one, that mounts end with this process.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "cache-node/csi/cut_off_readers.h"
#include "cache-node/csi/generation_readers.h"
#include "cache-node/csi/publication.h"
#include "common/thread_annotations.h"
#include "engine/engine.h"
#include "engine/mount/dataset_fs.h"
#include "engine/mount/mount_keeper.h"

namespace granary::cache {

struct MountTableOptions {
  std::filesystem::path root;  // where dataset mounts go
  KeeperClient keeper;  // the mount keeper (its socket and the node's token); none by default
  // How long a keeper that is not listening at start is waited for. Default 30 s: a pod's
  // containers start one after another, each within seconds.
  std::chrono::milliseconds keeperStartWait{30'000};
  MountOptions mount;  // how each dataset mount reads (passthrough)
  // Where the pods whose views ended are recorded (found when their views are bound again);
  // may be null.
  CutOffReaders* cutOff = nullptr;
  // Where the pods bound to each generation are counted; may be null.
  GenerationReaders* generationReaders = nullptr;
};

class MountTable {
 public:
  static constexpr std::chrono::seconds kKeeperStopGrace{1};

  // Takes back the connections the keeper holds, removes dead dataset mounts under the root and
  // reads the recorded publications; from then on, repairs each dataset's mounts when the
  // engine has it.
  MountTable(CacheEngine& engine, MountTableOptions options, ReaderAccounting& accounting);
  // Stops serving. Without a keeper the dataset mounts are unmounted; with one they stay, for the
  // next process to adopt. A keeper that stops too (its pod is deleted) would leave them dead:
  // when it is gone, or goes within kKeeperStopGrace, they are unmounted all the same.
  ~MountTable();

  // Stops serving at once for a process that takes the node over (cache-node/handover.h): the
  // mounts the keeper holds stay, for it to adopt; the others end. The table serves no more.
  void handOver();

  // Mounts the publication's version of its dataset (the newest held when it names none) once,
  // and bind-mounts it read-only at the target. Idempotent. NotFound while the dataset (or that
  // version) is not on this node; Unavailable when a mount fails. A warmFirst publication, the
  // first time its target is published, first waits until `warmDeadline` for this node's share
  // of the dataset to settle (phaseSettled: nothing left to warm); Unavailable with the progress
  // when it has not, asked again later. A target published before (its pod runs) is not held.
  Status publish(const Publication& publication,
                 std::chrono::steady_clock::time_point warmDeadline = {});
  // Removes a pod's bind mount and its directory. Idempotent: a missing target is fine.
  Status unpublish(const std::filesystem::path& targetPath);

 private:
  // The dataset's mount on this node: served already, adopted from the keeper, or mounted.
  Result<std::filesystem::path> datasetMountLocked(const std::shared_ptr<DatasetCache>& cache)
      GRANARY_REQUIRES(mutex_);
  Status bindLocked(const std::filesystem::path& source, const Publication& publication)
      GRANARY_REQUIRES(mutex_);
  // Hands the mount's connection to the keeper (then the mount outlives this process); false,
  // and a warning unless the keeper is still awaited, when the keeper does not take it.
  bool handToKeeperLocked(const std::filesystem::path& point, DatasetFilesystem& fs)
      GRANARY_REQUIRES(mutex_);
  // Adopts the dataset's kept connection and binds again the pods' views that died.
  void repairLocked(const std::shared_ptr<DatasetCache>& cache) GRANARY_REQUIRES(mutex_);
  void saveRecordsLocked() const GRANARY_REQUIRES(mutex_);
  // Waits for a keeper that was not listening at start, then hands it the mounts made meanwhile.
  void awaitKeeper(std::stop_token stop);
  std::filesystem::path mountpointOf(const DatasetKey& key) const {
    return options_.root / key.ns / key.name / std::to_string(key.generation);
  }
  std::filesystem::path recordsFile() const { return options_.root / ".publications"; }
  // A dataset mount's options: where a keeper carries it across restarts, its table of files
  // passed through beside it, for the process that adopts it.
  MountOptions mountOptionsFor(const std::filesystem::path& point) const {
    MountOptions options = options_.mount;
    if (!options_.keeper.socket().empty())
      options.passthroughTable = point.string() + ".passthrough";
    return options;
  }

  CacheEngine& engine_;
  MountTableOptions options_;
  ReaderAccounting& accounting_;
  Mutex mutex_;
  // By mount point.
  std::map<std::filesystem::path, std::unique_ptr<DatasetFilesystem>> mounts_
      GRANARY_GUARDED_BY(mutex_);
  // Connections to adopt, by mount point.
  std::map<std::filesystem::path, OwnedFd> kept_ GRANARY_GUARDED_BY(mutex_);
  // By target path.
  std::map<std::filesystem::path, PublicationRecord> published_ GRANARY_GUARDED_BY(mutex_);
  // Whether the keeper is still awaited (its absence is not yet worth a warning).
  bool keeperAwaited_ GRANARY_GUARDED_BY(mutex_) = false;
  std::jthread keeperWait_;  // runs awaitKeeper while the keeper is awaited
};

// True when `path` is the root of a mount (its device differs from its parent's).
bool isMountPoint(const std::filesystem::path& path);

// Unmounts a pod's view at `target` (detached when busy) and removes its directory. Idempotent:
// a target that is not mounted, or not there, is fine.
Status unbindTarget(const std::filesystem::path& target);

}  // namespace granary::cache
