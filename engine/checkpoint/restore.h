// Brings a job's checkpoint tree from its origin to the node before the workers start, so that
// the volume shows every file of the job's checkpoints (every rank's, written on any node), read
// from the local disk from then on. Files the node holds are kept when they are the origin's
// version or newer (written here and not drained yet); the rest come from the origin, read
// pinned to the version listed, written beside the tree and renamed into place (completion
// markers last), and entered in the drain's record as at the origin. A file the record says the
// origin held, unchanged here since, that the origin no longer has (another node's rotation
// removed it) is removed here too.
//
// Peers. Other nodes' trees of the same volume (the nodes a job's checkpoints were on) are read
// before the origin: a file a peer holds in the origin's version (its size, and the peer's word
// that the origin has it) comes from the peer, and so does a file only peers hold (written on a
// node and not drained, or copied to its peer before its node was lost), the newest version
// among them, which this node then uploads too. A peer that cannot be listed or read is passed
// over for the origin.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/origin/origin.h"

namespace granary::checkpoint {

// A file of a peer's tree of the volume.
struct PeerFile {
  std::string path;
  int64_t size = 0;
  int64_t modifiedNanos = 0;
  bool atOrigin = false;  // the origin holds this version, as the peer knows
};

// Another node's tree of the same volume (cache-node/checkpoint_peers.h reaches one over gRPC).
class PeerTree {
 public:
  virtual ~PeerTree() = default;
  virtual const std::string& node() const = 0;
  virtual Result<std::vector<PeerFile>> list() = 0;
  // Writes the bytes of `file` (that version: FailedPrecondition when the peer no longer holds
  // it) to `fd` from offset 0, checked end to end, telling `arrived` of each piece.
  virtual Status read(const PeerFile& file, int fd,
                      const std::function<void(int64_t)>& arrived) = 0;
};

struct RestoreProgress {
  int64_t files = 0;  // brought from the origin or peers so far
  int64_t bytes = 0;
  int64_t peerFiles = 0;  // of them, read from peers
  int64_t peerBytes = 0;
  int64_t totalFiles = 0;  // to bring in all
  int64_t totalBytes = 0;
  int64_t localFiles = 0;    // kept from the node's disk
  int64_t removedFiles = 0;  // removed here: the origin no longer has them
};

struct RestoreOptions {
  std::filesystem::path tree;        // the volume's directory
  std::filesystem::path recordFile;  // the drain's record
  std::filesystem::path staging;     // a directory on the tree's file system, outside it
  std::vector<std::shared_ptr<PeerTree>> peers;  // read before the origin, in this order
};

// Cancelled when `stop` ended it (what was restored stays, and is in the record). `progress`
// (may be empty) is called as each piece arrives.
Result<RestoreProgress> restoreTree(cache::Origin& origin, const RestoreOptions& options,
                                    std::stop_token stop,
                                    const std::function<void(const RestoreProgress&)>& progress);

}  // namespace granary::checkpoint
