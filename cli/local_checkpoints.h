// Local mode's checkpoint volume: the job's checkpoint tree kept under the cache directory
// (CACHE_DIR/checkpoints/<hash of the uri>/tree, so that a later run finds it), linked at the
// path the workers are given (RUN_DIR/<mountPath>), restored from the origin before the workers
// start and drained to it while they run, and after.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "cli/local_job.h"
#include "common/clock.h"
#include "engine/checkpoint/volume.h"

namespace granary::cli {

class LocalCheckpointVolume {
 public:
  using Say = std::function<void(const std::string&)>;

  // Restores what the origin holds and the tree lacks (saying how far it is, about once a
  // second), then starts the drain. A file:// uri's directory is created when missing.
  // InvalidArgument naming spec.checkpoints' field for a uri that cannot be used.
  static Result<std::unique_ptr<LocalCheckpointVolume>> open(
      const LocalCheckpoints& checkpoints, const std::filesystem::path& cacheDirectory,
      Clock& clock, std::stop_token stop, const Say& say);

  // "checkpoints /ckpt: 12 files, 3 to upload (1.2 GiB), lag 3.1s; 2.3 GiB uploaded".
  std::string progressLine() const;

  // On a full disk, drops files the origin holds, oldest first (CheckpointVolume::makeRoom),
  // saying what it dropped.
  void makeRoom(const Say& say);

  // Waits until every file written is at the origin (true), saying how far the drain is; false
  // when stopped first (what is left drains on the next run).
  bool drain(std::stop_token stop, const Say& say);

 private:
  LocalCheckpointVolume(std::string mountPath, std::unique_ptr<checkpoint::CheckpointVolume> volume)
      : mountPath_(std::move(mountPath)), volume_(std::move(volume)) {}

  std::string mountPath_;
  std::unique_ptr<checkpoint::CheckpointVolume> volume_;
};

// The line for one drain status (pure).
std::string checkpointLine(const std::string& mountPath, const checkpoint::DrainStatus& status);

}  // namespace granary::cli
