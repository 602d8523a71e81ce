// The peers a drain copies its tree's closed files to, so that a file outlives the loss of the
// node that wrote it before it reached the origin (on a cluster: other nodes of the job, chosen
// by the operator; cache-node/checkpoint_peers.h). The drain also tells them what became of the
// files they hold: at the origin (theirs to keep, never to upload), or removed.
//
// Errors: Unavailable (a peer cannot be reached: the drain tries again), FailedPrecondition (a
// peer cannot take the file now), Cancelled (the pace stopped a copy). Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "engine/checkpoint/origin_writer.h"
#include "engine/checkpoint/tree_journal.h"

namespace granary::checkpoint {

class CopyTargets {
 public:
  // The peers each file goes to now; `generation` changes whenever the set does.
  struct Set {
    uint64_t generation = 0;
    int count = 0;  // 0: no copies
  };

  virtual ~CopyTargets() = default;

  virtual Set current() const = 0;
  // Copies the `version.size` bytes of `fd` (read with pread from offset 0) as `path` to every
  // peer of the set, whole or not at all at each; `atOrigin` says the origin holds this version
  // already. `pace` as for uploads (OriginWriter::Pace).
  virtual Status copy(const std::string& path, int fd, const FileIdentity& version, bool atOrigin,
                      const OriginWriter::Pace& pace) = 0;
  // Tells the peers that `version` of `path` is at the origin.
  virtual Status atOrigin(const std::string& path, const FileIdentity& version) = 0;
  // Tells the peers that `path` is gone from the tree (and from the origin).
  virtual Status removed(const std::string& path) = 0;
};

}  // namespace granary::checkpoint
