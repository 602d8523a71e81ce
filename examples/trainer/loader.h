// Reads one rank's samples for one epoch the way a PyTorch DataLoader's workers do: reader
// threads each read whole files and build whole batches, which wait in a bounded queue until
// the training loop takes them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

#include "common/result.h"

namespace granary::trainer {

// Consecutive samples of a shard, read in full.
struct Batch {
  size_t samples = 0;            // files in this batch, 1 ≤ samples ≤ batch size
  std::vector<std::byte> bytes;  // their contents, back to back
};

struct LoaderOptions {
  // Samples per batch; the last batch of an epoch holds what is left. Default 8.
  int batchSize = 8;
  // Reader threads (DataLoader's num_workers). More overlap slow reads; each holds one batch
  // in memory while it reads. Default 4.
  int readers = 4;
  // Batches queued per reader (DataLoader's prefetch_factor): the queue holds at most
  // readers × prefetch batches, which bounds memory. Default 2.
  int prefetch = 2;
};

// Loads one epoch's shard. Reading starts in the constructor. Batch k holds the shard's
// samples [k × batchSize, (k + 1) × batchSize); batches may come out of order across reader
// threads, but each is handed out exactly once. next() is for one consumer thread; the rest
// is internal.
class EpochLoader {
 public:
  // `shard`: the files to read, in the order to batch them. Options must be ≥ 1.
  EpochLoader(std::vector<std::filesystem::path> shard, const LoaderOptions& options);
  // Stops the readers (each finishes at most the file it is reading) and joins them.
  ~EpochLoader() = default;

  EpochLoader(const EpochLoader&) = delete;
  EpochLoader& operator=(const EpochLoader&) = delete;

  // Blocks until a batch is ready and returns it; nullopt once every batch was handed out.
  // Unavailable when a file could not be read (the message names the path and the system's
  // reason); nothing useful follows such an error.
  Result<std::optional<Batch>> next();

 private:
  // One reader thread: claims batch indices in turn and queues each batch it reads.
  void readBatches(const std::stop_token& stop);
  // Reads batch `index` into `batch`; stops early (returning OK) when `stop` is requested.
  Status readBatch(size_t index, const std::stop_token& stop, Batch& batch) const;
  // Waits for room in the queue (or for `stop`), then queues `batch`.
  void enqueue(Batch batch, const std::stop_token& stop);
  void fail(Status status);

  const std::vector<std::filesystem::path> shard_;
  const size_t batchSize_;
  const size_t batchCount_;
  const size_t capacity_;              // batches the queue holds at most
  std::atomic<size_t> nextToRead_{0};  // the next batch index a reader claims

  std::mutex mutex_;
  std::condition_variable_any changed_;  // a batch was queued or taken, or a reader failed
  std::deque<Batch> ready_;              // guarded by mutex_
  size_t handedOut_ = 0;                 // guarded by mutex_: batches next() returned
  Status failure_;                       // guarded by mutex_: the first read error

  std::vector<std::jthread> readers_;  // last: stopped and joined before the rest is destroyed
};

}  // namespace granary::trainer
