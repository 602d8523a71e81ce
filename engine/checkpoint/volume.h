// A job's checkpoint volume on one node, as local mode and the cache node's CSI volume both keep
// it: a home directory holding the tree the workers write (HOME/tree), the drain's record
// (HOME/record), the restore's staging directory (HOME/restoring) and the one of copies from
// peers (HOME/copies); opened by restoring the tree from the origin, then drained to it (and
// copied to peers, when it has copy targets) until closed.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "common/clock.h"
#include "engine/checkpoint/drainer.h"
#include "engine/checkpoint/peer_copies.h"
#include "engine/checkpoint/restore.h"
#include "engine/origin/make_origin.h"

namespace granary::checkpoint {

// A stable directory name for `key` (16 hex digits of its 64-bit FNV-1a hash): a uri locally, a
// namespace and uri on a cluster node, so that a later job with the same key finds its tree.
std::string homeName(const std::string& key);

// The room on the disk of `path` for unprivileged writers, and the least it should keep:
// max(kFullMarginBytes, 1% of the disk). Below it the disk is full: saves are about to fail with
// ENOSPC, or do.
inline constexpr int64_t kFullMarginBytes = int64_t{256} << 20;
struct DiskRoom {
  int64_t free = 0;
  int64_t margin = 0;
  bool full() const { return free < margin; }
};
DiskRoom roomOf(const std::filesystem::path& path);

struct VolumeOptions {
  std::filesystem::path home;                    // created when missing
  int64_t bandwidthBytesPerSecond = 0;           // uploads' share of the origin; 0 unlimited
  std::shared_ptr<CopyTargets> copies;           // none: no copies
  std::vector<std::shared_ptr<PeerTree>> peers;  // the restore reads them before the origin
};

// What a node that copied files into this tree says of them since.
struct CopyNews {
  std::string writer;
  std::vector<std::pair<std::string, FileIdentity>> atOrigin;  // path, the writer's version
  std::vector<std::string> removed;                            // paths
  bool dropHeld = false;  // it copies here no longer: drop the copies it would upload
};

class CheckpointVolume {
 public:
  // Reaches the origin (InvalidArgument naming the uri or option that cannot be used, as
  // makeOrigin says), restores what it holds and the tree lacks, reporting `progress` as each
  // piece arrives, then starts the drain. Cancelled when `stop` ends the restore (what came
  // stays); ResourceExhausted when the disk fills.
  static Result<std::unique_ptr<CheckpointVolume>> open(
      const cache::SourceSpec& source, const cache::OriginSettings& settings,
      const VolumeOptions& options, Clock& clock, std::stop_token stop,
      const std::function<void(const RestoreProgress&)>& progress);

  const std::filesystem::path& tree() const { return tree_; }
  const RestoreProgress& restored() const { return restored_; }
  DrainStatus status() const { return drainer_->status(); }
  // As Drainer::waitDrained.
  bool waitDrained(std::stop_token stop, const std::function<void(const DrainStatus&)>& progress) {
    return drainer_->waitDrained(stop, progress);
  }

  // Another node's file placed into the tree, as placeCopy (peer_copies.h) says.
  Status placeCopy(const PeerCopy& copy, const std::function<Status(int fd)>& fill) {
    return checkpoint::placeCopy({tree_, tree_.parent_path() / "copies"}, *drainer_, copy, fill);
  }
  Status takeNews(const CopyNews& news);
  // What another node's restore may read here (TreeJournal::listing), and one such file.
  std::vector<PeerFile> listing() const;
  Status readFile(const PeerFile& file, const std::function<Status(std::string_view)>& each) const {
    return readTreeFile(tree_, file, each);
  }
  // On a full disk, drops files the origin holds, oldest first, until twice the margin is free
  // or none is left (Drainer::evict: never a file not at the origin); the bytes freed.
  int64_t makeRoom();
  // The node `writer` is lost: the copies of its files held here are uploaded from here.
  void release(const std::string& writer) { drainer_->release(writer); }

 private:
  CheckpointVolume(std::filesystem::path tree, RestoreProgress restored,
                   std::unique_ptr<Drainer> drainer)
      : tree_(std::move(tree)), restored_(restored), drainer_(std::move(drainer)) {}

  std::filesystem::path tree_;
  RestoreProgress restored_;
  std::unique_ptr<Drainer> drainer_;
};

}  // namespace granary::checkpoint
