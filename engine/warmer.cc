#include "engine/warmer.h"

#include <algorithm>
#include <iterator>

#include "common/backoff.h"
#include "common/log.h"
#include "engine/core/placement.h"

namespace granary::cache {
namespace {

constexpr int kWarmAttempts = 5;  // passes over failing chunks before Degraded
constexpr size_t kScanBatch = 1000;
// The largest access-order file read: it is held in memory while its paths are looked up.
constexpr int64_t kMaxAccessOrderFileBytes = int64_t{64} << 20;

}  // namespace

Warmer::Warmer(NodeContext& node, std::string datasetId, std::string label, ChunkFetcher& fetcher,
               WarmHost& host, DatasetMetrics* metrics, DatasetSettings settings)
    : node_(node),
      id_(std::move(datasetId)),
      label_(std::move(label)),
      fetcher_(fetcher),
      host_(host),
      metrics_(metrics),
      settings_(std::move(settings)),
      queue_(settings_.chunkSize) {
  // While a warm fetch waits for the dataset's own limit, lower priorities may fetch.
  fetcher_.setOwnLimitWaitObserver([this](bool waiting) {
    MutexLock lock(mutex_);
    if (turn_ != nullptr) turn_->waitingForOwnLimit(waiting);
  });
}

Warmer::~Warmer() {
  stop();
  fetcher_.setOwnLimitWaitObserver({});
}

void Warmer::start() {
  MutexLock lock(mutex_);
  if (stopping_) return;
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

void Warmer::stop() {
  std::jthread passes;
  {
    MutexLock lock(mutex_);
    stopping_ = true;
    passes = std::move(thread_);
  }
  changed_.notify_all();
  passes.request_stop();
  if (passes.joinable()) passes.join();
}

void Warmer::setPhase(Phase phase, std::string message) {
  MutexLock lock(mutex_);
  phase_ = phase;
  message_ = std::move(message);
  changed_.notify_all();
}

void Warmer::update(DatasetSettings settings) {
  MutexLock lock(mutex_);
  auto current = settings_.nodeSet, next = settings.nodeSet;
  std::sort(current.begin(), current.end());
  std::sort(next.begin(), next.end());
  const bool repass =
      next != current || settings.replicas != settings_.replicas || settings.warm != settings_.warm;
  settings_ = std::move(settings);
  if (settings_.warmConcurrency < 1) settings_.warmConcurrency = 1;
  if (repass) requestPassLocked();
  changed_.notify_all();
}

void Warmer::setPlan(WarmPlan plan) {
  MutexLock lock(mutex_);
  const bool repass = plan.accessOrder != plan_.accessOrder ||
                      plan.accessOrderFile != plan_.accessOrderFile ||
                      plan.hasReaders != plan_.hasReaders;
  if (turn_ != nullptr && plan.priority != plan_.priority) turn_->setPriority(plan.priority);
  plan_ = std::move(plan);
  if (repass) requestPassLocked();
  changed_.notify_all();
}

void Warmer::demand(WarmFile file) {
  MutexLock lock(mutex_);
  if (phase_ != Phase::kWarming) return;
  queue_.demand(std::move(file));
  changed_.notify_all();
}

void Warmer::capacityReached() {
  MutexLock lock(mutex_);
  capacityReached_ = true;
}

void Warmer::evictedForRoom() {
  MutexLock lock(mutex_);
  evictedForRoom_ = true;
}

void Warmer::keepFailed(const Status& error) {
  MutexLock lock(mutex_);
  diskFull_ = diskFull_ || error.code() == StatusCode::kResourceExhausted;
  lastError_ = error.message();
}

void Warmer::changedAtOrigin(const std::string& path) {
  MutexLock lock(mutex_);
  changedFiles_.insert(path);
}

WarmStanding Warmer::standing() const {
  MutexLock lock(mutex_);
  return {.phase = phase_,
          .message = message_,
          .capacityReached = capacityReached_,
          .warmStart = warmStart_};
}

void Warmer::waitSettled(std::chrono::milliseconds timeout) {
  MutexLock lock(mutex_);
  changed_.wait_for(lock, timeout, [this]() GRANARY_REQUIRES(mutex_) {
    return stopping_ || phase_ == Phase::kFailed ||
           (passDone_ && phase_ != Phase::kWarming && phase_ != Phase::kListing);
  });
}

// ---- the passes ----

void Warmer::requestPassLocked() {
  ++passRequested_;
  passDone_ = false;
  // Settled no more from now, not from when the pass starts: a status asked meanwhile is not
  // the last pass's.
  if ((phase_ == Phase::kReady || phase_ == Phase::kOnDemand) && warmAllowedLocked()) {
    phase_ = Phase::kWarming;
    message_.clear();
  }
}

bool Warmer::warmAllowedLocked() const {
  return !plan_.paused && (settings_.warm == WarmMode::kOnCreate ||
                           (settings_.warm == WarmMode::kOnJob && plan_.hasReaders));
}

std::string Warmer::notWarmingMessageLocked() const {
  return (plan_.paused                         ? std::string("warming is paused")
          : settings_.warm == WarmMode::kNever ? std::string("warm: Never")
                                               : std::string("warm: OnJob; no job has asked for "
                                                             "warming yet")) +
         "; files are cached as they are read";
}

bool Warmer::ownsLocked(const std::string& path) const {
  return owns(node_.nodeName, path, settings_.nodeSet, settings_.replicas);
}

void Warmer::run(std::stop_token stop) {
  const Logger log = Logger("cache").with({{"dataset", label_}});
  uint64_t donePass = 0, countedPass = 0;
  std::chrono::milliseconds retryDelay;
  {
    MutexLock lock(mutex_);
    retryDelay = settings_.warmRetryDelay;
  }
  Backoff retry({.initial = retryDelay, .max = std::chrono::seconds(60)});
  Backoff diskRetry({.initial = retryDelay, .max = std::chrono::seconds(60)});
  while (!stop.stop_requested()) {
    uint64_t pass;
    {
      MutexLock lock(mutex_);
      pass = passRequested_;
    }
    // The owned share is counted whether or not warming is allowed: progress is true on demand.
    if (pass != countedPass) host_.countOwnedShare(stop), countedPass = pass;
    {
      MutexLock lock(mutex_);
      if (passRequested_ != pass) continue;  // changed while counting: count again
      if (!warmAllowedLocked() && pass != donePass) {
        phase_ = Phase::kOnDemand;
        message_ = notWarmingMessageLocked();
        passDone_ = true;
        changed_.notify_all();
      }
      changed_.wait(lock, stop, [&]() GRANARY_REQUIRES(mutex_) {
        return passRequested_ != pass || (passRequested_ != donePass && warmAllowedLocked());
      });
      if (stop.stop_requested()) return;
      if (passRequested_ != pass) continue;
      phase_ = Phase::kWarming;
      message_.clear();
      passDone_ = false;
    }
    warmPass(stop, pass);
    if (stop.stop_requested()) return;
    ShareFacts share = host_.shareFacts();
    MutexLock lock(mutex_);
    if (passRequested_ != pass) continue;  // interrupted by a change: start over
    if (metrics_) metrics_->diskFull.set(diskFull_ ? 1 : 0);
    share.capacityReached = capacityReached_;
    share.evictedForRoom = evictedForRoom_;
    const PassOutcome outcome = judgePass({.changedFiles = changedFiles_,
                                           .diskFull = diskFull_,
                                           .failedChunks = failedChunks_,
                                           .retriesLeft = retry.attempts() < kWarmAttempts,
                                           .lastError = lastError_,
                                           .share = share});
    phase_ = outcome.phase;
    message_ = outcome.message;
    if (outcome.next != AfterPass::kDone) {
      // The same pass again, later: cached chunks are skipped. A full disk is tried for as long
      // as it takes, and counts as settled meanwhile.
      const bool room = outcome.next == AfterPass::kRetryWhenRoom;
      const auto delay = room ? diskRetry.next() : retry.next();
      if (room) {
        message_ += "; trying again in " + std::to_string((delay.count() + 999) / 1000) + "s";
        passDone_ = true;
        changed_.notify_all();
      }
      const std::string error = lastError_;  // fetches write it under the lock meanwhile
      const int64_t failed = failedChunks_;
      lock.unlock();
      log.warn(room ? "cache directories full" : "warm pass incomplete",
               {{"error", error}, {"failed_chunks", failed}, {"retry_in_ms", delay.count()}});
      node_.clock.sleepUntil(node_.clock.monoNow() + delay, stop);
      continue;
    }
    message_ = withHintNoteLocked(std::move(message_));
    retry.reset();
    diskRetry.reset();
    donePass = pass;
    passDone_ = true;
    log.info("warm pass done", {{"phase", phaseName(phase_)},
                                {"cached_files", share.cachedFiles},
                                {"cached_bytes", share.cachedBytes}});
    changed_.notify_all();
  }
}

void Warmer::warmPass(std::stop_token stop, uint64_t pass) {
  WarmPlan plan;
  int concurrency;
  {
    MutexLock lock(mutex_);
    plan = plan_;
    concurrency = settings_.warmConcurrency;
  }
  if (hintedPass_ != pass) {  // a retry reuses its pass's hint: the file is read once a pass
    hinted_ = hintedFiles(plan);
    hintedPass_ = pass;
  }
  WarmPriorities::Turn turn;
  if (node_.priorities != nullptr) turn = node_.priorities->enter(plan.priority);
  {
    MutexLock lock(mutex_);
    warmStart_ = node_.clock.wallNow();
    queue_.startPass(hinted_);
    turn_ = &turn;
    if (plan_.priority != plan.priority) turn.setPriority(plan_.priority);
    message_ = hintNote_;
    changedFiles_.clear();
    failedChunks_ = 0;
    capacityReached_ = evictedForRoom_ = diskFull_ = false;
    lastError_.clear();
  }
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < concurrency; ++i)
      workers.emplace_back([this, stop, &turn] { warmWorker(stop, turn); });
  }  // joins the workers
  MutexLock lock(mutex_);
  turn_ = nullptr;
}

std::vector<std::string> Warmer::readAccessOrderFile(const std::string& path, std::string& note) {
  const std::string named = "the access-order file \"" + path + "\"";
  auto entry = host_.stat(path);
  if (!entry.isOk() || entry->directory) {
    note = named + " is not a file of the dataset; warming in the default order";
    return {};
  }
  if (entry->size > kMaxAccessOrderFileBytes) {
    note = named + " is larger than " + std::to_string(kMaxAccessOrderFileBytes >> 20) +
           " MiB; warming in the default order";
    return {};
  }
  auto text = host_.read(path, 0, entry->size);
  if (!text.isOk()) {
    note = named + " could not be read (" + text.status().message() +
           "); warming in the default order";
    return {};
  }
  return parseAccessOrder(*text);
}

std::vector<WarmFile> Warmer::hintedFiles(const WarmPlan& plan) {
  std::string note;
  std::vector<std::string> paths = plan.accessOrder;
  if (!plan.accessOrderFile.empty()) {
    auto listed = readAccessOrderFile(plan.accessOrderFile, note);
    paths.insert(paths.end(), std::make_move_iterator(listed.begin()),
                 std::make_move_iterator(listed.end()));
  }
  std::vector<WarmFile> files;
  std::set<std::string> unknown;
  int64_t unknownCount = 0;
  for (const auto& path : paths) {
    auto entry = node_.manifests.stat(id_, path);
    if (!entry.isOk() || entry->directory) {
      if (unknown.size() < 4) unknown.insert(path);
      ++unknownCount;
      continue;
    }
    MutexLock lock(mutex_);
    if (ownsLocked(path)) files.push_back({entry->path, entry->size, entry->etag});
  }
  if (unknownCount > 0) {
    note += (note.empty() ? "" : "; ") + std::to_string(unknownCount) +
            " paths of the access order are not files of the dataset and were skipped (" +
            someOf(unknown) + ")";
  }
  MutexLock lock(mutex_);
  hintNote_ = std::move(note);
  return files;
}

std::string Warmer::withHintNoteLocked(std::string message) const {
  if (hintNote_.empty()) return message;
  return message.empty() ? hintNote_ : message + "; " + hintNote_;
}

void Warmer::warmWorker(std::stop_token stop, const WarmPriorities::Turn& turn) {
  while (auto chunk = nextWarmChunk(stop)) {
    const WarmFile& warm = chunk->warmFile();
    const ManifestEntry file{.path = warm.path, .size = warm.size, .etag = warm.version};
    const ChunkId id{id_, file.path, chunk->index};
    Status status = Status::ok();
    bool fetched = false;
    if (!node_.chunks.contains(id)) {
      // Datasets of a higher priority fetch first.
      if (!turn.wait(stop)) return;
      // Tokens are scarce: demand reads take them first. Unlimited, warming runs on beside the
      // readers, which then find ahead of them what it fetched.
      if (fetcher_.bandwidthLimited()) fetcher_.waitForNoDemand(stop);
      if (stop.stop_requested()) return;
      auto got = fetcher_.fetch(file, chunk->index, FetchKind::kWarm, stop);
      status = got.status();
      if (status.isOk()) {
        MutexLock lock(mutex_);
        fetched = true;
        // The chunk may have come from a fill that could not be kept.
        if (!node_.chunks.contains(id))
          status = resourceExhausted(lastError_.empty() ? "not kept" : lastError_);
      }
    }
    finishWarmChunk(*chunk, status, fetched);
  }
}

std::optional<WarmChunk> Warmer::nextWarmChunk(std::stop_token stop) {
  MutexLock lock(mutex_);
  const uint64_t pass = passRequested_;
  const auto passGoesOn = [&]() GRANARY_REQUIRES(mutex_) {
    return !stop.stop_requested() && !stopping_ && pass == passRequested_ && !plan_.paused &&
           !capacityReached_ && !diskFull_;
  };
  while (passGoesOn()) {
    if (auto chunk = queue_.next()) return chunk;
    if (!queue_.needsScan()) return std::nullopt;
    if (scanning_) {  // another worker reads the next batch
      changed_.wait(lock, stop, [&]() GRANARY_REQUIRES(mutex_) {
        return !scanning_ || stopping_ || pass != passRequested_;
      });
      continue;
    }
    // The manifest is read without the lock, so status and readers never wait on the store.
    // No other pass starts meanwhile: the pass ends only once its workers, this one too, return.
    scanning_ = true;
    std::string cursor = queue_.cursor();
    lock.unlock();
    auto batch = node_.manifests.files(id_, cursor, kScanBatch);
    lock.lock();
    scanning_ = false;
    changed_.notify_all();
    addScanLocked(std::move(batch), std::move(cursor));
  }
  return std::nullopt;
}

void Warmer::addScanLocked(Result<std::vector<ManifestEntry>> batch, std::string cursor) {
  if (!batch.isOk()) {
    ++failedChunks_, lastError_ = batch.status().message();
    queue_.addScan({}, /*last=*/true);
    return;
  }
  queue_.cursor() = std::move(cursor);
  std::vector<WarmFile> owned;
  for (auto& file : *batch) {
    if (!file.directory && ownsLocked(file.path))
      owned.push_back({std::move(file.path), file.size, std::move(file.etag)});
  }
  queue_.addScan(std::move(owned), /*last=*/batch->empty());
}

void Warmer::finishWarmChunk(const WarmChunk& chunk, const Status& status, bool fetched) {
  MutexLock lock(mutex_);
  // A change at the origin is counted by the fetcher, a full disk by the keeper; the rest is
  // retried.
  const bool failed = !status.isOk() && status.code() != StatusCode::kFailedPrecondition &&
                      status.code() != StatusCode::kResourceExhausted;
  if (failed) ++failedChunks_, lastError_ = status.message();
  if (queue_.finish(chunk, status.isOk(), fetched) && metrics_) metrics_->warmFiles.increment();
}

}  // namespace granary::cache
