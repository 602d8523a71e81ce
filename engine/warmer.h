// The warm passes of one dataset generation on this node, and the phase they leave it in.
//
// Once the dataset is listed (start()), a background thread runs passes: each one counts the
// owned share (through its WarmHost), resolves the plan's access-order hint, then has
// `warmConcurrency` workers fetch (ChunkFetcher, FetchKind::kWarm) every owned chunk not on disk
// in the order of a WarmQueue: files a reader waits on (demand()), the hint, then the manifest.
// Between datasets, the node's WarmPriorities let the highest priority fetch first; under a
// bandwidth limit, warm fetches wait while a demand fetch is in flight. A finished pass is judged
// by judgePass (engine/core/dataset_phase.h): retried with a backoff while chunks failed or the
// disk is full, else settled. A new node set, replica count, warm mode or plan order starts a
// new pass; a pause, the quota or a full disk ends the one in progress.
//
// The warmer holds the dataset's phase and its message for the whole generation; the lister
// sets kListing and kFailed (setPhase) before start().
//
// Thread-safety: every method may be called from any thread. The warmer calls its host without
// holding its own lock, and the host must not hold its own lock while calling the warmer.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "engine/cache_metrics.h"
#include "engine/chunk_fetcher.h"
#include "engine/core/dataset_phase.h"
#include "engine/core/warm_priorities.h"
#include "engine/core/warm_queue.h"
#include "engine/dataset_settings.h"

namespace granary::cache {

// What the warmer needs of its dataset: reads through the cache, and the owned share's
// accounting. Called from the warmer's threads.
class WarmHost {
 public:
  virtual ~WarmHost() = default;
  // The dataset's file at `path`, as a reader sees it (waits for the listing).
  virtual Result<ManifestEntry> stat(const std::string& path) = 0;
  // `length` bytes of `path` from `offset`, read through the cache.
  virtual Result<std::string> read(const std::string& path, int64_t offset, int64_t length) = 0;
  // Counts the files and bytes this node owns under the current node set.
  virtual void countOwnedShare(std::stop_token stop) = 0;
  // The owned share against the quota now, cached counts refreshed (capacityReached unset: the
  // warmer knows it).
  virtual ShareFacts shareFacts() = 0;
};

// Where the dataset stands, as the warmer knows it.
struct WarmStanding {
  Phase phase = Phase::kPending;
  std::string message;           // why the phase is what it is
  bool capacityReached = false;  // the quota refused a chunk since the pass began
  Clock::WallTime warmStart{};   // when the last pass began
};

class Warmer {
 public:
  // `datasetId` names the generation in the stores; `label` is for the log. `metrics` may be
  // null. `fetcher`, `host` and `metrics` must outlive the warmer.
  Warmer(NodeContext& node, std::string datasetId, std::string label, ChunkFetcher& fetcher,
         WarmHost& host, DatasetMetrics* metrics, DatasetSettings settings);
  ~Warmer();  // stop()
  Warmer(const Warmer&) = delete;
  Warmer& operator=(const Warmer&) = delete;

  // The dataset is listed: passes begin. Does nothing once stopped.
  void start() GRANARY_EXCLUDES(mutex_);
  // Ends the passes and waits for their fetches; waitSettled() returns. Idempotent.
  void stop() GRANARY_EXCLUDES(mutex_);

  // The lister's phases (kListing, kFailed), before start().
  void setPhase(Phase phase, std::string message) GRANARY_EXCLUDES(mutex_);
  // New settings (already checked by the dataset). A changed node set, replica count or warm
  // mode starts a new pass.
  void update(DatasetSettings settings) GRANARY_EXCLUDES(mutex_);
  // A changed access order, access-order file or readers starts a new pass; a new priority
  // applies to the pass in progress.
  void setPlan(WarmPlan plan) GRANARY_EXCLUDES(mutex_);

  // A reader waits on `file`, which this node owns: while warming, its chunks go next.
  void demand(WarmFile file) GRANARY_EXCLUDES(mutex_);
  // What fetches met: the quota refused a chunk; a chunk could not be written (`error`, a full
  // disk when ResourceExhausted); `path` changed at the origin since the pass began.
  void capacityReached() GRANARY_EXCLUDES(mutex_);
  // The dataset gave up chunks to make room on a disk that filled before the quota (LRU).
  void evictedForRoom() GRANARY_EXCLUDES(mutex_);
  void keepFailed(const Status& error) GRANARY_EXCLUDES(mutex_);
  void changedAtOrigin(const std::string& path) GRANARY_EXCLUDES(mutex_);

  WarmStanding standing() const GRANARY_EXCLUDES(mutex_);
  // Waits until warming has nothing left to do (Ready, Degraded, Failed, ...), the warmer stops
  // or `timeout` passes.
  void waitSettled(std::chrono::milliseconds timeout) GRANARY_EXCLUDES(mutex_);

 private:
  void run(std::stop_token stop) GRANARY_EXCLUDES(mutex_);
  bool warmAllowedLocked() const GRANARY_REQUIRES(mutex_);
  // Asks the passes for a new one (the settings or the plan changed).
  void requestPassLocked() GRANARY_REQUIRES(mutex_);
  std::string notWarmingMessageLocked() const GRANARY_REQUIRES(mutex_);
  bool ownsLocked(const std::string& path) const GRANARY_REQUIRES(mutex_);

  // Runs pass `pass` (or runs it again, for a retry).
  void warmPass(std::stop_token stop, uint64_t pass) GRANARY_EXCLUDES(mutex_);
  // The plan's access-order hint (its paths, then its file's) as owned files of the manifest, in
  // order; sets hintNote_ to what the status says of it (unknown paths, a missing file).
  std::vector<WarmFile> hintedFiles(const WarmPlan& plan) GRANARY_EXCLUDES(mutex_);
  // The plan's access-order file's paths; a note for the status when it cannot be read.
  std::vector<std::string> readAccessOrderFile(const std::string& path, std::string& note);
  void warmWorker(std::stop_token stop, const WarmPriorities::Turn& turn);
  std::optional<WarmChunk> nextWarmChunk(std::stop_token stop) GRANARY_EXCLUDES(mutex_);
  // Gives the queue the scan's next batch, read from `cursor` (advanced past it), or ends the
  // scan on a read error.
  void addScanLocked(Result<std::vector<ManifestEntry>> batch, std::string cursor)
      GRANARY_REQUIRES(mutex_);
  void finishWarmChunk(const WarmChunk& chunk, const Status& status, bool fetched)
      GRANARY_EXCLUDES(mutex_);
  // `message` with hintNote_ after it.
  std::string withHintNoteLocked(std::string message) const GRANARY_REQUIRES(mutex_);

  NodeContext& node_;
  const std::string id_;
  const std::string label_;
  ChunkFetcher& fetcher_;
  WarmHost& host_;
  DatasetMetrics* const metrics_;

  mutable Mutex mutex_;
  std::condition_variable_any changed_;  // waits on mutex_: any state change below
  DatasetSettings settings_ GRANARY_GUARDED_BY(mutex_);
  WarmPlan plan_ GRANARY_GUARDED_BY(mutex_);
  Phase phase_ GRANARY_GUARDED_BY(mutex_) = Phase::kPending;
  std::string message_ GRANARY_GUARDED_BY(mutex_);
  bool stopping_ GRANARY_GUARDED_BY(mutex_) = false;
  uint64_t passRequested_ GRANARY_GUARDED_BY(mutex_) = 1;  // bumped by a node-set or plan change
  bool passDone_ GRANARY_GUARDED_BY(mutex_) = false;
  Clock::WallTime warmStart_ GRANARY_GUARDED_BY(mutex_){};
  // The warm pass in progress.
  WarmQueue queue_ GRANARY_GUARDED_BY(mutex_);
  bool scanning_ GRANARY_GUARDED_BY(mutex_) = false;  // a worker reads the scan's next batch
  // The pass's place among the node's datasets; null between passes.
  WarmPriorities::Turn* turn_ GRANARY_GUARDED_BY(mutex_) = nullptr;
  std::string hintNote_ GRANARY_GUARDED_BY(mutex_);  // what the status says of the hint
  // The hint as resolved for pass hintedPass_, which its retries reuse (run()'s thread only).
  std::vector<WarmFile> hinted_;
  std::optional<uint64_t> hintedPass_;
  // Found changed at the origin since this pass began.
  std::set<std::string> changedFiles_ GRANARY_GUARDED_BY(mutex_);
  int64_t failedChunks_ GRANARY_GUARDED_BY(mutex_) = 0;
  std::string lastError_ GRANARY_GUARDED_BY(mutex_);
  bool capacityReached_ GRANARY_GUARDED_BY(mutex_) = false;
  bool evictedForRoom_ GRANARY_GUARDED_BY(mutex_) = false;
  bool diskFull_ GRANARY_GUARDED_BY(mutex_) = false;

  std::jthread thread_ GRANARY_GUARDED_BY(mutex_);  // the passes; last: stops first
};

}  // namespace granary::cache
