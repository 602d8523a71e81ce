// Brings a job's checkpoint tree from its origin to the node before the workers start, so that
// the volume shows every file of the job's checkpoints (every rank's, written on any node), read
// from the local disk from then on. Files the node holds are kept when they are the origin's
// version or newer (written here and not drained yet); the rest come from the origin, read
// pinned to the version listed, written beside the tree and renamed into place (completion
// markers last), and entered in the drain's record as at the origin. A file the record says the
// origin held, unchanged here since, that the origin no longer has (another node's rotation
// removed it) is removed here too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <stop_token>

#include "common/result.h"
#include "engine/origin/origin.h"

namespace granary::checkpoint {

struct RestoreProgress {
  int64_t files = 0;  // brought from the origin so far
  int64_t bytes = 0;
  int64_t totalFiles = 0;  // to bring in all
  int64_t totalBytes = 0;
  int64_t localFiles = 0;    // kept from the node's disk
  int64_t removedFiles = 0;  // removed here: the origin no longer has them
};

struct RestoreOptions {
  std::filesystem::path tree;        // the volume's directory
  std::filesystem::path recordFile;  // the drain's record
  std::filesystem::path staging;     // a directory on the tree's file system, outside it
};

// Cancelled when `stop` ended it (what was restored stays, and is in the record). `progress`
// (may be empty) is called as each piece arrives.
Result<RestoreProgress> restoreTree(cache::Origin& origin, const RestoreOptions& options,
                                    std::stop_token stop,
                                    const std::function<void(const RestoreProgress&)>& progress);

}  // namespace granary::checkpoint
