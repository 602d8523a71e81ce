#include "engine/chunk_fetcher.h"

#include <xxhash.h>

#include <algorithm>

#include "common/backoff.h"
#include "common/log.h"

namespace granary::cache {
namespace {

// The largest file read whole (one that its origin pins by size only): it is held in memory.
constexpr int64_t kMaxWholeFileBytes = int64_t{64} << 20;

int64_t chunkCount(int64_t size, int64_t chunkSize) { return (size + chunkSize - 1) / chunkSize; }

}  // namespace

std::string DatasetKey::id() const {
  return ns + "/" + name + "/" + std::to_string(generation) + "/" + uid;
}

ChunkFetcher::ChunkFetcher(NodeContext& node, DatasetKey key, std::vector<DatasetSource> sources,
                           Settings settings, ChunkKeeper& keeper, DatasetMetrics* metrics)
    : node_(node),
      key_(std::move(key)),
      id_(key_.id()),
      sources_(std::move(sources)),
      chunkSize_(settings.chunkSize),
      keeper_(keeper),
      metrics_(metrics),
      bandwidth_(node.clock, settings.bandwidthLimit),
      readRetryTime_(settings.readRetryTime) {
  // A read charges its length before it starts, and each attempt the origin's client sends again
  // is charged likewise before it goes.
  for (auto& source : sources_) {
    source.origin->setRetryGate([this](int64_t bytes) {
      bandwidth_.acquire(bytes);
      node_.bandwidth.acquire(bytes);
    });
  }
}

std::string ChunkFetcher::heldKey(const ManifestEntry& file, int64_t index) const {
  return chunkId(file.path, index).key() + '\0' + file.etag;
}

ChunkId ChunkFetcher::chunkId(const std::string& path, int64_t index) const {
  return ChunkId{id_, path, index};
}

std::shared_ptr<const std::string> ChunkFetcher::share(std::string bytes) const {
  if (node_.buffers == nullptr) return std::make_shared<const std::string>(std::move(bytes));
  return node_.buffers->share(std::move(bytes));
}

int64_t ChunkFetcher::chunkLength(const ManifestEntry& file, int64_t index) const {
  return std::min(chunkSize_, file.size - index * chunkSize_);
}

bool ChunkFetcher::bandwidthLimited() const {
  return bandwidth_.rate() > 0 || node_.bandwidth.rate() > 0;
}

void ChunkFetcher::setReadRetryTime(std::chrono::milliseconds time) {
  MutexLock lock(mutex_);
  readRetryTime_ = time;
}

void ChunkFetcher::setOwnLimitWaitObserver(std::function<void(bool waiting)> observer) {
  MutexLock lock(mutex_);
  ownLimitWaitObserver_ = std::move(observer);
}

int64_t ChunkFetcher::originRetries() const {
  int64_t retries = 0;
  for (const auto& source : sources_) retries += source.origin->retries();
  return retries;
}

bool ChunkFetcher::waitForNoDemand(std::stop_token stop) {
  MutexLock lock(mutex_);
  return demandDone_.wait(lock, stop,
                          [this]() GRANARY_REQUIRES(mutex_) { return demandInFlight_ == 0; });
}

Result<FetchedChunk> ChunkFetcher::fetch(const ManifestEntry& file, int64_t index, FetchKind kind,
                                         std::stop_token stop) {
  const std::string key = chunkId(file.path, index).key();
  if (node_.held != nullptr) {
    if (auto held = node_.held->find(heldKey(file, index))) return std::move(*held);
  }
  // Counted while in flight, so that warm fetches under a bandwidth limit give way.
  struct DemandMark {
    ChunkFetcher& self;
    bool active;
    DemandMark(ChunkFetcher& fetcher, bool demand) : self(fetcher), active(demand) {
      if (!active) return;
      MutexLock lock(self.mutex_);
      ++self.demandInFlight_;
    }
    ~DemandMark() {
      if (!active) return;
      MutexLock lock(self.mutex_);
      --self.demandInFlight_;
      self.demandDone_.notify_all();
    }
  } mark(*this, kind == FetchKind::kDemand);
  auto chunk = flights_.run(key, [&] { return fetchUncached(file, index, kind, stop); });
  if (chunk.status().code() == StatusCode::kFailedPrecondition) keeper_.changedAtOrigin(file.path);
  return chunk;
}

Result<FetchedChunk> ChunkFetcher::fetchUncached(const ManifestEntry& file, int64_t index,
                                                 FetchKind kind, std::stop_token stop) {
  // A fetch of this chunk may have finished between the caller's miss and this flight.
  auto local = node_.chunks.read(chunkId(file.path, index));
  if (local.isOk()) return FetchedChunk{share(std::move(*local)), Source::kLocal};
  keeper_.forgetIfDamaged(file.path, index, local.status());
  if (isSizeVersion(file.etag)) return fetchFromWholeFile(file, index, kind, stop);
  const std::vector<std::string> owners = keeper_.ownersOf(file.path);
  const int64_t length = chunkLength(file, index);
  const bool selfOwns = std::find(owners.begin(), owners.end(), node_.nodeName) != owners.end();
  if (auto shared = fromSameSource(file, index, kind, selfOwns)) return std::move(*shared);
  std::optional<FetchedChunk> fetched;
  if (node_.peers != nullptr && owners.front() != node_.nodeName) {
    for (const auto& owner : owners) {
      if (owner == node_.nodeName) continue;
      auto data = node_.peers->readChunk(
          owner, key_, file.path, index, file.etag, /*fill=*/owner == owners.front(), length, stop,
          node_.buffers ? node_.buffers->take(static_cast<size_t>(length)) : std::string());
      if (data.isOk() && static_cast<int64_t>(data->size()) == length) {
        fetched = FetchedChunk{share(std::move(*data)), Source::kPeer};
        break;
      }
      if (data.status().code() == StatusCode::kFailedPrecondition) return data.status();
    }
  }
  if (!fetched) {
    GRANARY_ASSIGN_OR_RETURN(std::string data,
                             readOriginAs(kind, file, index * chunkSize_, length, stop));
    fetched = FetchedChunk{share(std::move(data)), Source::kOrigin};
  }
  if (selfOwns) {
    keeper_.countFetched(length);
    const Status kept =
        keeper_.keep(chunkId(file.path, index), *fetched->bytes, chunkCount(file.size, chunkSize_));
    if (kept.isOk()) countWarmed(kind, length);
  } else if (node_.held != nullptr && kind == FetchKind::kDemand) {
    node_.held->hold(heldKey(file, index), *fetched);
  }
  return std::move(*fetched);
}

std::optional<FetchedChunk> ChunkFetcher::fromSameSource(const ManifestEntry& file, int64_t index,
                                                         FetchKind kind, bool selfOwns) {
  if (node_.sameSource == nullptr) return std::nullopt;
  const std::optional<ChunkId> from = node_.sameSource->holderOf(key_, file, index);
  if (!from) return std::nullopt;
  const int64_t length = chunkLength(file, index);
  const ChunkId to = chunkId(file.path, index);
  if (selfOwns && keeper_.keepShared(*from, to, length, chunkCount(file.size, chunkSize_)).isOk()) {
    keeper_.countFetched(length);
    countWarmed(kind, length);
    if (auto kept = node_.chunks.read(to); kept.isOk())
      return FetchedChunk{share(std::move(*kept)), Source::kLocal};
  }
  // Not kept (the quota is full, or the other dataset's chunk went meanwhile): read it there.
  auto data = node_.chunks.read(*from);
  if (!data.isOk() || static_cast<int64_t>(data->size()) != length) return std::nullopt;
  return FetchedChunk{share(std::move(*data)), Source::kLocal};
}

Result<FetchedChunk> ChunkFetcher::fetchFromWholeFile(const ManifestEntry& file, int64_t index,
                                                      FetchKind kind, std::stop_token stop) {
  GRANARY_ASSIGN_OR_RETURN(const auto whole, wholeFiles_.run(file.path, [&] {
    return fetchWholeFile(file, kind, stop);
  }));
  const auto offset = static_cast<size_t>(index * chunkSize_);
  return FetchedChunk{std::make_shared<const std::string>(
                          whole->substr(offset, static_cast<size_t>(chunkLength(file, index)))),
                      Source::kOrigin};
}

Result<std::shared_ptr<const std::string>> ChunkFetcher::fetchWholeFile(const ManifestEntry& file,
                                                                        FetchKind kind,
                                                                        std::stop_token stop) {
  if (file.size > kMaxWholeFileBytes) {
    return invalidArgument(
        "\"" + file.path + "\" is " + std::to_string(file.size) +
        " bytes and its origin sends neither ETag nor Last-Modified: such a file is read whole, "
        "in one request, so that it is never assembled from two versions, and only up to " +
        std::to_string(kMaxWholeFileBytes >> 20) +
        " MiB; have the origin send an ETag or Last-Modified header");
  }
  GRANARY_ASSIGN_OR_RETURN(std::string data, readOriginAs(kind, file, 0, file.size, stop));
  auto whole = std::make_shared<const std::string>(std::move(data));
  GRANARY_RETURN_IF_ERROR(pinContent(file, *whole));
  const std::vector<std::string> owners = keeper_.ownersOf(file.path);
  if (std::find(owners.begin(), owners.end(), node_.nodeName) != owners.end()) {
    keeper_.countFetched(file.size);
    keepWhole(file, *whole, kind);
  }
  return whole;
}

Status ChunkFetcher::pinContent(const ManifestEntry& file, const std::string& whole) {
  const auto changed = [&] {
    return failedPrecondition(file.path +
                              " changed at the origin since this node first read it (its "
                              "origin pins it by size only, and the content differs)");
  };
  const int64_t chunks = chunkCount(file.size, chunkSize_);
  for (int64_t i = 0; i < chunks; ++i) {
    const auto cached = node_.chunks.read(chunkId(file.path, i));
    if (!cached.isOk()) keeper_.forgetIfDamaged(file.path, i, cached.status());
    if (cached.isOk() &&
        *cached != std::string_view(whole).substr(static_cast<size_t>(i * chunkSize_),
                                                  static_cast<size_t>(chunkLength(file, i))))
      return changed();
  }
  const uint64_t hash = XXH3_64bits(whole.data(), whole.size());
  MutexLock lock(mutex_);
  const auto [pinned, _] = pinnedContent_.try_emplace(file.path, hash);
  return pinned->second == hash ? Status::ok() : changed();
}

void ChunkFetcher::keepWhole(const ManifestEntry& file, const std::string& whole, FetchKind kind) {
  const int64_t chunks = chunkCount(file.size, chunkSize_);
  for (int64_t i = 0; i < chunks; ++i) {
    const ChunkId id = chunkId(file.path, i);
    if (node_.chunks.contains(id)) continue;
    const int64_t length = chunkLength(file, i);
    const auto offset = static_cast<size_t>(i * chunkSize_);
    if (keeper_.keep(id, whole.substr(offset, static_cast<size_t>(length)), chunks).isOk())
      countWarmed(kind, length);
  }
}

void ChunkFetcher::countWarmed(FetchKind kind, int64_t bytes) {
  if (kind == FetchKind::kWarm && metrics_ != nullptr)
    metrics_->warmBytes.increment(static_cast<double>(bytes));
}

Result<std::string> ChunkFetcher::readOriginAs(FetchKind kind, const ManifestEntry& file,
                                               int64_t offset, int64_t length,
                                               std::stop_token stop) {
  return kind == FetchKind::kDemand ? readOriginForReader(file, offset, length, stop)
                                    : readOrigin(kind, file, offset, length);
}

Result<std::string> ChunkFetcher::readOrigin(FetchKind kind, const ManifestEntry& file,
                                             int64_t offset, int64_t length) {
  const DatasetSource* source = nullptr;
  for (const auto& s : sources_) {
    const bool under = s.mount.empty() || file.path.starts_with(s.mount + "/");
    if (under && (source == nullptr || s.mount.size() > source->mount.size())) source = &s;
  }
  if (source == nullptr) return notFound("no source holds \"" + file.path + "\"");
  const std::string originPath =
      source->mount.empty() ? file.path : file.path.substr(source->mount.size() + 1);
  awaitOwnLimit(kind, length);
  node_.bandwidth.acquire(length);
  auto data = source->origin->read(originPath, offset, length, file.etag);
  if (data.isOk() && static_cast<int64_t>(data->size()) != length) {
    data = unavailable("the origin returned " + std::to_string(data->size()) + " of " +
                       std::to_string(length) + " bytes of \"" + file.path + "\"");
  }
  if (!data.isOk() && metrics_ != nullptr) metrics_->originErrors.increment();
  if (!data.isOk()) noteIfGone(file.path, data.status());
  return data;
}

void ChunkFetcher::noteIfGone(const std::string& path, const Status& error) {
  if (error.code() != StatusCode::kNotFound && error.code() != StatusCode::kFailedPrecondition)
    return;
  MutexLock lock(mutex_);
  if (gone_.size() >= kGoneKept || std::find(gone_.begin(), gone_.end(), path) != gone_.end())
    return;
  gone_.push_back(path);
  Logger("cache").warn(
      "the origin no longer has a file as this version listed it: reads of it that the cache "
      "cannot serve fail",
      {{"dataset", key_.label()}, {"version", key_.generation}, {"path", path}, {"error", error}});
}

std::vector<std::string> ChunkFetcher::goneFromOrigin() const {
  MutexLock lock(mutex_);
  return gone_;
}

void ChunkFetcher::awaitOwnLimit(FetchKind kind, int64_t length) {
  const auto paidAt = bandwidth_.reserve(length);
  if (!paidAt) return;
  std::function<void(bool)> observer;
  if (kind == FetchKind::kWarm) {
    MutexLock lock(mutex_);
    observer = ownLimitWaitObserver_;
  }
  if (observer) observer(true);
  node_.clock.sleepUntil(*paidAt, {});
  if (observer) observer(false);
}

Result<std::string> ChunkFetcher::readOriginForReader(const ManifestEntry& file, int64_t offset,
                                                      int64_t length, std::stop_token stop) {
  std::chrono::milliseconds retryTime;
  {
    MutexLock lock(mutex_);
    retryTime = readRetryTime_;
  }
  const auto deadline = node_.clock.monoNow() + retryTime;
  Backoff backoff({.initial = std::chrono::milliseconds(50), .max = std::chrono::seconds(2)});
  while (true) {
    auto data = readOrigin(FetchKind::kDemand, file, offset, length);
    if (data.isOk() || data.status().code() != StatusCode::kUnavailable) return data;
    const auto wake = node_.clock.monoNow() + backoff.next();
    if (wake > deadline || !node_.clock.sleepUntil(wake, stop)) return data;
    keeper_.countReaderRetry();
  }
}

}  // namespace granary::cache
