// The node's checkpoint volumes: CSI volumes with volumeAttributes.checkpoints, one per job
// namespace and uri, whose tree lives under ROOT/<homeName(namespace, uri)>/tree on the cache
// disk. The first pod to publish one restores the tree from the origin (engine/checkpoint/
// volume.h); each pod then gets a read-write bind mount of the tree at its target, so that its
// writes go straight to the disk, and the tree drains to the origin in the background while the
// node runs. A volume whose pods all ended keeps draining; sweep() closes it once drained (the
// tree stays, for the job's next pods on this node; its record goes).
//
// A restore larger than one publish call allows goes on in the background: publish answers
// Unavailable with how far it is, and the kubelet, which retries, shows that on the pod.
//
// Restarts. The bind mounts are the kernel's: they, and the workers' writes, outlive this
// process. Each volume records its origin (HOME/volume, without credentials); a new process
// opens again, at start, every recorded volume that needs no credentials, and the others at the
// next publish of one of their pods (the CSIDriver asks the kubelet to publish again every few
// minutes: requiresRepublish), each resuming its drain where the drain's record left it.
//
// Copies. With copy targets, each volume copies its closed files to the peers the operator sets
// (cache-node/checkpoint_peers.h), and takes other nodes' copies into its tree.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache-node/csi/publication.h"
#include "common/clock.h"
#include "common/thread_annotations.h"
#include "engine/checkpoint/volume.h"

namespace granary::cache {

struct CheckpointVolumesOptions {
  std::filesystem::path root;  // where the volumes' homes go: a directory on the cache disk
  OriginSettings origins;      // the node's checkpointOriginRoots, as file:// roots
  // The copy targets of the volume of a namespace and uri, as it opens; unset: no copies.
  std::function<std::shared_ptr<checkpoint::CopyTargets>(const std::string& ns,
                                                         const std::string& uri)>
      copyTargets;
  // The trees of the nodes a publication names (name, address), read by the restore before the
  // origin; unset: the origin only.
  std::function<std::vector<std::shared_ptr<checkpoint::PeerTree>>(
      const std::string& ns, const std::string& uri,
      const std::vector<std::pair<std::string, std::string>>& peers)>
      peerTrees;
};

// One volume as the node's metrics and logs show it.
struct CheckpointVolumeState {
  std::string ns, uri;
  int pods = 0;                                          // pods bound to it now
  std::optional<checkpoint::DrainStatus> drain;          // once restored
  std::optional<checkpoint::RestoreProgress> restoring;  // while restoring
  int64_t diskFreeBytes = 0;                             // on the volume's disk
  bool diskFull = false;                                 // checkpoint::roomOf(...).full()
};

class CheckpointVolumes {
 public:
  // Opens again the recorded volumes that need no credentials.
  CheckpointVolumes(CheckpointVolumesOptions options, Clock& clock);
  // Stops restores and drains; the drains' records keep what was done.
  ~CheckpointVolumes();

  // Restores the volume when this node has not opened it yet, waiting for that until
  // `deadline`, then binds its tree read-write at the target. Idempotent. Unavailable while the
  // restore goes on (saying how far it is) or when the bind fails; the restore's error (with
  // InvalidArgument naming the attribute for a uri the node may not write, e.g. a file:// uri
  // outside checkpointOriginRoots) when it failed, which the next publish tries again.
  Status publish(const CheckpointPublication& publication,
                 std::chrono::steady_clock::time_point deadline);
  // Whether `target` is a pod's view of one of the volumes.
  bool holds(const std::filesystem::path& target) const;
  // Unbinds the pod's view; the volume drains on.
  Status unpublish(const std::filesystem::path& target);

  // ---- Other nodes' copies (engine/checkpoint/peer_copies.h). FailedPrecondition when this node
  // has not opened the volume of `ns` and `uri`. ----
  Status placeCopy(const std::string& ns, const std::string& uri, const checkpoint::PeerCopy& copy,
                   const std::function<Status(int fd)>& fill);
  Status takeNews(const std::string& ns, const std::string& uri, const checkpoint::CopyNews& news);
  // The node `writer` is lost: this node uploads the copies of its files it holds.
  Status release(const std::string& ns, const std::string& uri, const std::string& writer);
  // For another node's restore: the tree's files (CheckpointVolume::listing), and one of them.
  Result<std::vector<checkpoint::PeerFile>> listing(const std::string& ns,
                                                    const std::string& uri) const;
  Status readFile(const std::string& ns, const std::string& uri, const checkpoint::PeerFile& file,
                  const std::function<Status(std::string_view)>& each) const;

  std::vector<CheckpointVolumeState> states() const;
  // Closes the volumes no pod uses that have nothing left to drain.
  void sweep();
  // CheckpointVolume::makeRoom of each open volume: a full disk drops files the origin holds.
  void makeRoom();

 private:
  struct Volume;
  // Starts the restore of `volume` on a thread of its own (again, after one that failed).
  void startRestoreLocked(Volume& volume, const SourceSpec& source, int64_t bandwidth,
                          const std::vector<std::pair<std::string, std::string>>& peers = {})
      GRANARY_REQUIRES(mutex_);
  void openRecorded();
  // The volume of `ns` and `uri` when it is open here, kept alive while the caller uses it.
  Result<std::shared_ptr<Volume>> opened(const std::string& ns, const std::string& uri) const;

  CheckpointVolumesOptions options_;
  Clock& clock_;
  mutable Mutex mutex_;
  std::condition_variable_any restored_;  // a restore ended
  // By home directory. Shared with a publish waiting for the volume's restore, which may
  // outlive its entry here.
  std::map<std::filesystem::path, std::shared_ptr<Volume>> volumes_ GRANARY_GUARDED_BY(mutex_);
  // Pods' targets, to their volume's home.
  std::map<std::filesystem::path, std::filesystem::path> targets_ GRANARY_GUARDED_BY(mutex_);
};

// The record of a volume's origin (no credentials): one line, tab-separated: uri, endpoint,
// region, bandwidth, whether it has credentials, then each option as name=value. Pure.
struct VolumeRecord {
  std::string ns;
  SourceSpec source;  // without credentials
  int64_t bandwidthBytesPerSecond = 0;
  bool needsCredentials = false;
};
std::string formatVolumeRecord(const VolumeRecord& record);
std::optional<VolumeRecord> parseVolumeRecord(const std::string& text);

}  // namespace granary::cache
