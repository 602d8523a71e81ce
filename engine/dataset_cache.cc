#include "engine/dataset_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/backoff.h"
#include "common/log.h"
#include "engine/core/placement.h"

namespace granary::cache {
namespace {

constexpr int64_t kMinChunkSize = 4096;
constexpr int kWarmAttempts = 5;  // passes over failing chunks before Degraded
constexpr size_t kScanBatch = 1000;
// The largest access-order file read: it is held in memory while its paths are looked up.
constexpr int64_t kMaxAccessOrderFileBytes = int64_t{64} << 20;
// The largest file read whole (one that its origin pins by size only): it is held in memory.
constexpr int64_t kMaxWholeFileBytes = int64_t{64} << 20;

// Up to three of `paths`, comma-separated, with ", ..." when there are more.
std::string someOf(const std::set<std::string>& paths) {
  std::string text;
  int shown = 0;
  for (const auto& path : paths) {
    if (shown == 3) return text + ", ...";
    text += (shown++ ? ", " : "") + path;
  }
  return text;
}

// Eviction ids: path NUL chunk index (the generation is the policy's owner).
std::string policyId(const std::string& path, int64_t index) {
  std::string id = path;
  id += '\0';
  id += std::to_string(index);
  return id;
}

std::pair<std::string, int64_t> parsePolicyId(const std::string& id) {
  const size_t nul = id.rfind('\0');
  return {id.substr(0, nul), std::atoll(id.c_str() + nul + 1)};
}

std::unique_ptr<EvictionPolicy> makePolicy(const DatasetSettings& settings) {
  return settings.eviction == Eviction::kPin ? makePinPolicy(settings.capacityBytes)
                                             : makeLruPolicy(settings.capacityBytes);
}

int64_t chunkCount(int64_t size, int64_t chunkSize) { return (size + chunkSize - 1) / chunkSize; }

std::string joinPath(const std::string& mount, const std::string& path) {
  return mount.empty() ? path : mount + "/" + path;
}

}  // namespace

std::string DatasetKey::id() const {
  return ns + "/" + name + "/" + std::to_string(generation) + "/" + uid;
}

std::string_view phaseName(Phase phase) {
  switch (phase) {
    case Phase::kPending:
      return "Pending";
    case Phase::kListing:
      return "Listing";
    case Phase::kWarming:
      return "Warming";
    case Phase::kReady:
      return "Ready";
    case Phase::kDegraded:
      return "Degraded";
    case Phase::kFailed:
      return "Failed";
    case Phase::kOnDemand:
      return "OnDemand";
    case Phase::kQuotaFull:
      return "QuotaFull";
  }
  return "Unknown";
}

bool phaseSettled(Phase phase) {
  return phase != Phase::kPending && phase != Phase::kListing && phase != Phase::kWarming;
}

bool phaseAsConfigured(Phase phase) {
  return phase == Phase::kReady || phase == Phase::kOnDemand || phase == Phase::kQuotaFull;
}

Result<std::unique_ptr<DatasetCache>> DatasetCache::create(NodeContext& node, DatasetKey key,
                                                           std::vector<DatasetSource> sources,
                                                           DatasetSettings settings) {
  if (sources.empty()) return invalidArgument("dataset has no source");
  if (std::find(settings.nodeSet.begin(), settings.nodeSet.end(), node.nodeName) ==
      settings.nodeSet.end()) {
    return invalidArgument("node_set: must include this node (\"" + node.nodeName + "\")");
  }
  if (settings.replicas < 1) return invalidArgument("cache.replicas: must be at least 1");
  if (settings.chunkSize < kMinChunkSize)
    return invalidArgument("cache.chunk_size_bytes: must be at least 4096");
  if (settings.capacityBytes <= 0) return invalidArgument("cache.capacity_bytes: must be positive");
  if (settings.warmConcurrency < 1) settings.warmConcurrency = 1;
  std::unique_ptr<DatasetCache> cache(
      new DatasetCache(node, std::move(key), std::move(sources), std::move(settings)));
  // What is already on disk (verified by the chunk store at start-up) counts against the quota.
  // A file's chunks come one after another.
  std::string file;
  int64_t fileChunks = 0;
  GRANARY_RETURN_IF_ERROR(node.chunks.forEachChunk(cache->id_, [&](ChunkId&& id, int64_t size) {
    std::vector<std::string> evict;
    if (!cache->policy_->admit(policyId(id.path, id.index), size, evict)) {
      (void)node.chunks.remove(id);  // the quota shrank: it no longer fits
      return;
    }
    if (id.path != file) {
      file = id.path;
      auto entry = node.manifests.stat(cache->id_, file);
      fileChunks = entry.isOk() ? chunkCount(entry->size, cache->settings_.chunkSize) : 0;
    }
    if (fileChunks > 0) cache->cachedFiles_.added(id.path, fileChunks);
    cache->dropEvicted(evict);
  }));
  if (cache->metrics_) {
    cache->metrics_->capacityBytes.set(static_cast<double>(cache->settings_.capacityBytes));
    cache->metrics_->usedBytes.set(static_cast<double>(cache->policy_->usedBytes()));
  }
  cache->thread_ = std::jthread([raw = cache.get()](std::stop_token stop) { raw->run(stop); });
  return cache;
}

DatasetCache::DatasetCache(NodeContext& node, DatasetKey key, std::vector<DatasetSource> sources,
                           DatasetSettings settings)
    : node_(node),
      key_(std::move(key)),
      id_(key_.id()),
      sources_(std::move(sources)),
      bandwidth_(node.clock, settings.bandwidthLimit),
      settings_(std::move(settings)),
      fetchRate_(node.clock.monoNow()),
      queue_(settings_.chunkSize) {
  if (node_.metrics) metrics_ = node_.metrics->forDataset(key_.label());
  policy_ = makePolicy(settings_);
}

DatasetCache::~DatasetCache() { stopWarming(); }

void DatasetCache::stopWarming() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.request_stop();
  if (thread_.joinable()) thread_.join();
}

Status DatasetCache::update(DatasetSettings settings) {
  std::lock_guard lock(mutex_);
  if (settings.chunkSize != settings_.chunkSize || settings.eviction != settings_.eviction ||
      settings.capacityBytes != settings_.capacityBytes) {
    return failedPrecondition(
        "cache.chunk_size_bytes, cache.policy and cache.capacity_bytes are fixed for a "
        "generation: change the Dataset's spec to start a new one");
  }
  std::sort(settings.nodeSet.begin(), settings.nodeSet.end());
  auto current = settings_.nodeSet;
  std::sort(current.begin(), current.end());
  if (std::find(settings.nodeSet.begin(), settings.nodeSet.end(), node_.nodeName) ==
      settings.nodeSet.end()) {
    return invalidArgument("node_set: must include this node (\"" + node_.nodeName + "\")");
  }
  const bool repass = settings.nodeSet != current || settings.replicas != settings_.replicas ||
                      settings.warm != settings_.warm;
  if (settings.bandwidthLimit != settings_.bandwidthLimit)
    bandwidth_.setRate(settings.bandwidthLimit);
  settings_ = std::move(settings);
  if (settings_.warmConcurrency < 1) settings_.warmConcurrency = 1;
  if (repass) ++passRequested_, passDone_ = false;
  changed_.notify_all();
  return Status::ok();
}

void DatasetCache::setWarmPlan(WarmPlan plan) {
  std::lock_guard lock(mutex_);
  const bool repass = plan.accessOrder != plan_.accessOrder ||
                      plan.accessOrderFile != plan_.accessOrderFile ||
                      plan.hasReaders != plan_.hasReaders;
  if (turn_ != nullptr && plan.priority != plan_.priority) turn_->setPriority(plan.priority);
  plan_ = std::move(plan);
  if (repass) ++passRequested_, passDone_ = false;
  changed_.notify_all();
}

Status DatasetCache::waitListed() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return listed_ || stopping_ || phase_ == Phase::kFailed; });
  if (listed_) return Status::ok();
  return unavailable("dataset " + key_.label() + " is not listed" +
                     (message_.empty() ? std::string() : ": " + message_));
}

Result<ManifestEntry> DatasetCache::stat(const std::string& path) {
  GRANARY_RETURN_IF_ERROR(waitListed());
  return node_.manifests.stat(id_, path);
}

Result<ManifestEntry> DatasetCache::statInode(uint64_t inode) {
  GRANARY_RETURN_IF_ERROR(waitListed());
  return node_.manifests.statInode(id_, inode);
}

Result<std::vector<ManifestEntry>> DatasetCache::list(const std::string& directory,
                                                      const std::string& after, size_t limit) {
  GRANARY_RETURN_IF_ERROR(waitListed());
  return node_.manifests.list(id_, directory, after, limit);
}

// ---- reads ----

ChunkId DatasetCache::chunkId(const std::string& path, int64_t index) const {
  return ChunkId{id_, path, index};
}

int64_t DatasetCache::chunkLength(const ManifestEntry& file, int64_t index) const {
  return std::min(settings_.chunkSize, file.size - index * settings_.chunkSize);
}

bool DatasetCache::hasChunk(const std::string& path, int64_t index) const {
  return node_.chunks.contains(chunkId(path, index));
}

Result<Piece> DatasetCache::readPiece(const std::string& path, int64_t offset, int64_t maxLength) {
  GRANARY_ASSIGN_OR_RETURN(ManifestEntry file, stat(path));
  return readPiece(file, offset, maxLength);
}

Result<DatasetCache::ChunkSpan> DatasetCache::spanOf(const ManifestEntry& file, int64_t offset,
                                                     int64_t maxLength) const {
  if (offset < 0 || maxLength < 0) return invalidArgument("offset and length must be >= 0");
  if (file.directory) return failedPrecondition("\"" + file.path + "\" is a directory");
  if (offset >= file.size || maxLength == 0) return ChunkSpan{};
  const int64_t index = offset / settings_.chunkSize;
  const int64_t within = offset - index * settings_.chunkSize;
  return ChunkSpan{index, within, std::min(maxLength, chunkLength(file, index) - within)};
}

Result<Piece> DatasetCache::readPiece(const ManifestEntry& file, int64_t offset,
                                      int64_t maxLength) {
  GRANARY_ASSIGN_OR_RETURN(const ChunkSpan span, spanOf(file, offset, maxLength));
  if (span.length == 0) return Piece{};
  auto local = node_.chunks.read(chunkId(file.path, span.index), span.within, span.length);
  if (!local.isOk()) return readMissing(file, span, local.status());
  countHit(file, span.index, static_cast<int64_t>(local->size()));
  return Piece{std::move(*local), Source::kLocal};
}

Result<PieceRead> DatasetCache::readPieceInto(const ManifestEntry& file, int64_t offset,
                                              int64_t maxLength, std::span<char> buffer,
                                              bool fetch) {
  if (maxLength > static_cast<int64_t>(buffer.size()))
    return invalidArgument("the buffer is smaller than the read");
  GRANARY_ASSIGN_OR_RETURN(const ChunkSpan span, spanOf(file, offset, maxLength));
  if (span.length == 0) return PieceRead{};
  auto local =
      node_.chunks.readInto(chunkId(file.path, span.index), span.within, span.length, buffer);
  if (local.isOk()) {
    countHit(file, span.index, *local);
    return PieceRead{*local, Source::kLocal};
  }
  if (!fetch && local.status().code() == StatusCode::kNotFound) return local.status();
  GRANARY_ASSIGN_OR_RETURN(Piece piece, readMissing(file, span, local.status()));
  std::memcpy(buffer.data(), piece.data.data(), piece.data.size());
  return PieceRead{static_cast<int64_t>(piece.data.size()), piece.source};
}

Result<std::string> DatasetCache::read(const std::string& path, int64_t offset, int64_t length) {
  std::string out;
  if (length < 0) length = INT64_MAX - offset;
  while (length > 0) {
    GRANARY_ASSIGN_OR_RETURN(Piece piece, readPiece(path, offset, length));
    if (piece.data.empty()) break;
    offset += static_cast<int64_t>(piece.data.size());
    length -= static_cast<int64_t>(piece.data.size());
    out += piece.data;
  }
  return out;
}

void DatasetCache::countHit(const ManifestEntry& file, int64_t index, int64_t bytes) {
  {
    std::lock_guard lock(mutex_);
    policy_->touch(policyId(file.path, index));
  }
  countRead(Source::kLocal, bytes, true);
}

Result<Piece> DatasetCache::readMissing(const ManifestEntry& file, const ChunkSpan& span,
                                        const Status& local) {
  if (local.code() != StatusCode::kNotFound && !forgetIfDamaged(file.path, span.index, local))
    return local;
  {
    // While warming, the rest of a file a reader waits on goes first.
    std::lock_guard lock(mutex_);
    if (phase_ == Phase::kWarming && ownsLocked(file.path)) {
      queue_.demand({file.path, file.size, file.etag});
      changed_.notify_all();
    }
  }
  GRANARY_ASSIGN_OR_RETURN(Piece whole, fetchChunk(file, span.index, FetchKind::kDemand));
  const auto available = static_cast<int64_t>(whole.data.size()) - span.within;
  if (available <= 0) return Piece{{}, whole.source};
  countRead(whole.source, std::min(span.length, available), false);
  return Piece{whole.data.substr(span.within, span.length), whole.source};
}

Result<std::string> DatasetCache::readChunkForPeer(const std::string& path, int64_t index,
                                                   const std::string& etag, bool fill) {
  GRANARY_ASSIGN_OR_RETURN(ManifestEntry file, stat(path));
  if (file.directory) return failedPrecondition("\"" + path + "\" is a directory");
  if (etag != file.etag) {
    return failedPrecondition("\"" + path + "\": the caller's version differs from this node's");
  }
  if (index < 0 || index >= chunkCount(file.size, settings_.chunkSize))
    return invalidArgument("chunk index out of range");
  auto local = node_.chunks.read(chunkId(path, index));
  if (local.isOk()) return std::move(*local);
  forgetIfDamaged(path, index, local.status());
  bool owner;
  {
    std::lock_guard lock(mutex_);
    owner = ownsLocked(path);
  }
  if (!fill || !owner) return notFound("chunk is not cached on " + node_.nodeName);
  GRANARY_ASSIGN_OR_RETURN(Piece piece, fetchChunk(file, index, FetchKind::kWarm));
  return std::move(piece.data);
}

bool DatasetCache::forgetIfDamaged(const std::string& path, int64_t index, const Status& local) {
  if (local.code() != StatusCode::kCorruption) return false;
  if (metrics_) metrics_->damagedChunks.increment();
  std::lock_guard lock(mutex_);
  policy_->forget(policyId(path, index));
  cachedFiles_.removed(path);
  return true;
}

bool DatasetCache::ownsLocked(const std::string& path) const {
  return owns(node_.nodeName, path, settings_.nodeSet, settings_.replicas);
}

Result<Piece> DatasetCache::fetchChunk(const ManifestEntry& file, int64_t index, FetchKind kind) {
  struct DemandMark {
    DatasetCache& self;
    bool active;
    ~DemandMark() {
      if (!active) return;
      --self.demandInFlight_;
      std::lock_guard lock(self.mutex_);
      self.changed_.notify_all();
    }
  } mark{*this, kind == FetchKind::kDemand};
  if (mark.active) ++demandInFlight_;
  auto piece = flights_.run(chunkId(file.path, index).key(),
                            [&] { return fetchUncached(file, index, kind); });
  if (piece.status().code() == StatusCode::kFailedPrecondition) {
    std::lock_guard lock(mutex_);
    changedFiles_.insert(file.path);
  }
  return piece;
}

Result<Piece> DatasetCache::fetchUncached(const ManifestEntry& file, int64_t index,
                                          FetchKind kind) {
  // A fetch of this chunk may have finished between the caller's miss and this flight.
  auto local = node_.chunks.read(chunkId(file.path, index));
  if (local.isOk()) return Piece{std::move(*local), Source::kLocal};
  forgetIfDamaged(file.path, index, local.status());
  if (isSizeVersion(file.etag)) return fetchFromWholeFile(file, index, kind);
  std::vector<std::string> owners;
  {
    std::lock_guard lock(mutex_);
    owners = ownersOf(file.path, settings_.nodeSet, settings_.replicas);
  }
  const int64_t length = chunkLength(file, index);
  const bool selfOwns = std::find(owners.begin(), owners.end(), node_.nodeName) != owners.end();
  Piece piece;
  bool fetched = false;
  if (node_.peers != nullptr && owners.front() != node_.nodeName) {
    for (const auto& owner : owners) {
      if (owner == node_.nodeName) continue;
      auto data = node_.peers->readChunk(owner, key_, file.path, index, file.etag,
                                         /*fill=*/owner == owners.front());
      if (data.isOk() && static_cast<int64_t>(data->size()) == length) {
        piece = Piece{std::move(*data), Source::kPeer};
        fetched = true;
        break;
      }
      if (data.status().code() == StatusCode::kFailedPrecondition) return data.status();
    }
  }
  if (!fetched) {
    const int64_t offset = index * settings_.chunkSize;
    auto data = kind == FetchKind::kDemand ? readOriginForReader(file, offset, length)
                                           : readOrigin(file, offset, length);
    if (!data.isOk()) return data.status();
    piece = Piece{std::move(*data), Source::kOrigin};
  }
  if (selfOwns) {
    countFetched(length);
    const Status kept =
        keep(chunkId(file.path, index), piece.data, chunkCount(file.size, settings_.chunkSize));
    if (kept.isOk()) countWarmed(kind, length);
  }
  return piece;
}

Result<Piece> DatasetCache::fetchFromWholeFile(const ManifestEntry& file, int64_t index,
                                               FetchKind kind) {
  GRANARY_ASSIGN_OR_RETURN(const auto whole,
                           wholeFiles_.run(file.path, [&] { return fetchWholeFile(file, kind); }));
  const auto offset = static_cast<size_t>(index * settings_.chunkSize);
  return Piece{whole->substr(offset, static_cast<size_t>(chunkLength(file, index))),
               Source::kOrigin};
}

Result<std::shared_ptr<const std::string>> DatasetCache::fetchWholeFile(const ManifestEntry& file,
                                                                        FetchKind kind) {
  if (file.size > kMaxWholeFileBytes) {
    return invalidArgument(
        "\"" + file.path + "\" is " + std::to_string(file.size) +
        " bytes and its origin sends neither ETag nor Last-Modified: such a file is read whole, "
        "in one request, so that it is never assembled from two versions, and only up to " +
        std::to_string(kMaxWholeFileBytes >> 20) +
        " MiB; have the origin send an ETag or Last-Modified header");
  }
  GRANARY_ASSIGN_OR_RETURN(std::string data, kind == FetchKind::kDemand
                                                 ? readOriginForReader(file, 0, file.size)
                                                 : readOrigin(file, 0, file.size));
  auto whole = std::make_shared<const std::string>(std::move(data));
  GRANARY_RETURN_IF_ERROR(pinContent(file, *whole));
  bool selfOwns;
  {
    std::lock_guard lock(mutex_);
    selfOwns = ownsLocked(file.path);
  }
  if (selfOwns) {
    countFetched(file.size);
    keepWhole(file, *whole, kind);
  }
  return whole;
}

Status DatasetCache::pinContent(const ManifestEntry& file, const std::string& whole) {
  const auto changed = [&] {
    return failedPrecondition(file.path +
                              " changed at the origin since this node first read it (its "
                              "origin pins it by size only, and the content differs)");
  };
  const int64_t chunks = chunkCount(file.size, settings_.chunkSize);
  for (int64_t i = 0; i < chunks; ++i) {
    const auto cached = node_.chunks.read(chunkId(file.path, i));
    if (!cached.isOk()) forgetIfDamaged(file.path, i, cached.status());
    if (cached.isOk() &&
        *cached != std::string_view(whole).substr(static_cast<size_t>(i * settings_.chunkSize),
                                                  static_cast<size_t>(chunkLength(file, i))))
      return changed();
  }
  const uint64_t hash = XXH3_64bits(whole.data(), whole.size());
  std::lock_guard lock(mutex_);
  const auto [pinned, _] = pinnedContent_.try_emplace(file.path, hash);
  return pinned->second == hash ? Status::ok() : changed();
}

void DatasetCache::keepWhole(const ManifestEntry& file, const std::string& whole, FetchKind kind) {
  const int64_t chunks = chunkCount(file.size, settings_.chunkSize);
  for (int64_t i = 0; i < chunks; ++i) {
    const ChunkId id = chunkId(file.path, i);
    if (node_.chunks.contains(id)) continue;
    const int64_t length = chunkLength(file, i);
    const auto offset = static_cast<size_t>(i * settings_.chunkSize);
    if (keep(id, whole.substr(offset, static_cast<size_t>(length)), chunks).isOk())
      countWarmed(kind, length);
  }
}

void DatasetCache::countWarmed(FetchKind kind, int64_t bytes) {
  if (kind == FetchKind::kWarm && metrics_)
    metrics_->warmBytes.increment(static_cast<double>(bytes));
}

void DatasetCache::countFetched(int64_t bytes) {
  std::lock_guard lock(mutex_);
  fetchRate_.add(node_.clock.monoNow(), bytes);
}

Result<std::string> DatasetCache::readOrigin(const ManifestEntry& file, int64_t offset,
                                             int64_t length) {
  const DatasetSource* source = nullptr;
  for (const auto& s : sources_) {
    const bool under = s.mount.empty() || file.path.starts_with(s.mount + "/");
    if (under && (source == nullptr || s.mount.size() > source->mount.size())) source = &s;
  }
  if (source == nullptr) return notFound("no source holds \"" + file.path + "\"");
  const std::string originPath =
      source->mount.empty() ? file.path : file.path.substr(source->mount.size() + 1);
  bandwidth_.acquire(length);
  node_.bandwidth.acquire(length);
  auto data = source->origin->read(originPath, offset, length, file.etag);
  if (data.isOk() && static_cast<int64_t>(data->size()) != length) {
    data = unavailable("the origin returned " + std::to_string(data->size()) + " of " +
                       std::to_string(length) + " bytes of \"" + file.path + "\"");
  }
  if (!data.isOk() && metrics_) metrics_->originErrors.increment();
  return data;
}

Result<std::string> DatasetCache::readOriginForReader(const ManifestEntry& file, int64_t offset,
                                                      int64_t length) {
  std::chrono::milliseconds retryTime;
  {
    std::lock_guard lock(mutex_);
    retryTime = settings_.readRetryTime;
  }
  const auto deadline = node_.clock.monoNow() + retryTime;
  Backoff backoff({.initial = std::chrono::milliseconds(50), .max = std::chrono::seconds(2)});
  while (true) {
    auto data = readOrigin(file, offset, length);
    if (data.isOk() || data.status().code() != StatusCode::kUnavailable) return data;
    const auto wake = node_.clock.monoNow() + backoff.next();
    if (wake > deadline || !node_.clock.sleepUntil(wake, thread_.get_stop_token())) return data;
    std::lock_guard lock(mutex_);
    ++reads_.originRetries;
  }
}

Status DatasetCache::keep(const ChunkId& id, const std::string& data, int64_t fileChunks) {
  const std::string pid = policyId(id.path, id.index);
  const auto size = static_cast<int64_t>(data.size());
  const bool replacing = node_.chunks.contains(id);
  std::vector<std::string> evict;
  {
    std::lock_guard lock(mutex_);
    if (!policy_->admit(pid, size, evict)) {
      capacityReached_ = true;
      return resourceExhausted("the dataset's cache quota is full");
    }
    writing_.insert(pid);
  }
  dropEvicted(evict);
  Status put = node_.chunks.put(id, data);
  // The disk filled before the quota did: the policy gives up chunks (LRU: its least recently
  // used) until this one fits, or gives up nothing (Pin).
  while (put.code() == StatusCode::kResourceExhausted) {
    {
      std::lock_guard lock(mutex_);
      evict = policy_->shrink(size, pid);
    }
    if (evict.empty()) break;
    dropEvicted(evict);
    put = node_.chunks.put(id, data);
  }
  std::lock_guard lock(mutex_);
  writing_.erase(pid);
  if (!put.isOk()) {
    policy_->forget(pid);
    diskFull_ = diskFull_ || put.code() == StatusCode::kResourceExhausted;
    lastError_ = put.message();
  } else if (!policy_->holds(pid)) {
    (void)node_.chunks.remove(id);  // another fetch evicted it while it was written
  } else if (!replacing) {
    cachedFiles_.added(id.path, fileChunks);
  }
  if (metrics_) metrics_->usedBytes.set(static_cast<double>(policy_->usedBytes()));
  return put;
}

void DatasetCache::dropEvicted(const std::vector<std::string>& evicted) {
  std::lock_guard lock(mutex_);  // no fetch of the same chunk may admit it meanwhile
  for (const auto& doomed : evicted) {
    if (writing_.contains(doomed)) continue;  // its writer removes it when done
    const auto [path, index] = parsePolicyId(doomed);
    (void)node_.chunks.remove(chunkId(path, index));
    cachedFiles_.removed(path);
  }
}

void DatasetCache::refreshCachedLocked() {
  progress_.cachedBytes = policy_->usedBytes();
  progress_.cachedFiles = cachedFiles_.complete() + ownedEmptyFiles_;
}

void DatasetCache::countRead(Source source, int64_t bytes, bool hit) {
  {
    std::lock_guard lock(mutex_);
    (source == Source::kLocal  ? reads_.localBytes
     : source == Source::kPeer ? reads_.peerBytes
                               : reads_.originBytes) += bytes;
    ++(hit ? reads_.chunkHits : reads_.chunkMisses);
  }
  if (!metrics_) return;
  (source == Source::kLocal  ? metrics_->localBytes
   : source == Source::kPeer ? metrics_->peerBytes
                             : metrics_->originBytes)
      .increment(static_cast<double>(bytes));
  (hit ? metrics_->chunkHits : metrics_->chunkMisses).increment();
}

// ---- listing and warming ----

void DatasetCache::setPhase(Phase phase, std::string message) {
  std::lock_guard lock(mutex_);
  phase_ = phase;
  message_ = std::move(message);
  changed_.notify_all();
}

Status DatasetCache::listOrigins(std::stop_token stop) {
  if (auto totals = node_.manifests.totals(id_); totals.isOk()) {
    std::lock_guard lock(mutex_);
    progress_.totalFiles = totals->files;
    progress_.totalBytes = totals->bytes;
    return Status::ok();
  }
  GRANARY_RETURN_IF_ERROR(node_.manifests.drop(id_));  // a listing cut short: start over
  ManifestTotals totals;
  for (const auto& source : sources_) {
    const Status listed = source.origin->list([&](std::vector<OriginObject>&& batch) {
      if (stop.stop_requested()) return cancelled("stopping");
      std::vector<ManifestEntry> entries;
      entries.reserve(batch.size());
      for (auto& object : batch) {
        entries.push_back({.path = joinPath(source.mount, object.path),
                           .size = object.size,
                           .etag = std::move(object.etag),
                           .modifiedUnixNanos = object.modifiedUnixNanos,
                           .mode = object.mode});
        totals.files += 1;
        totals.bytes += object.size;
      }
      GRANARY_RETURN_IF_ERROR(node_.manifests.put(id_, entries));
      std::lock_guard lock(mutex_);
      progress_.totalFiles = totals.files;
      progress_.totalBytes = totals.bytes;
      return Status::ok();
    });
    GRANARY_RETURN_IF_ERROR(listed);
  }
  return node_.manifests.markComplete(id_, totals);
}

void DatasetCache::run(std::stop_token stop) {
  const Logger log = Logger("cache").with({{"dataset", key_.label()}});
  setPhase(Phase::kListing, "listing the origin");
  if (const Status listed = listOrigins(stop); !listed.isOk()) {
    if (stop.stop_requested()) return;
    log.error("listing failed", {{"error", listed}});
    setPhase(Phase::kFailed, "listing the origin failed: " + listed.message());
    return;
  }
  {
    std::lock_guard lock(mutex_);
    listed_ = true;
    changed_.notify_all();
  }
  uint64_t donePass = 0, countedPass = 0;
  Backoff retry({.initial = settings_.warmRetryDelay, .max = std::chrono::seconds(60)});
  Backoff diskRetry({.initial = settings_.warmRetryDelay, .max = std::chrono::seconds(60)});
  while (!stop.stop_requested()) {
    uint64_t pass;
    {
      std::lock_guard lock(mutex_);
      pass = passRequested_;
    }
    // The owned share is counted whether or not warming is allowed: progress is true on demand.
    if (pass != countedPass) countOwnedShare(stop), countedPass = pass;
    {
      std::unique_lock lock(mutex_);
      if (passRequested_ != pass) continue;  // changed while counting: count again
      const auto warmAllowed = [&] {
        return !plan_.paused && (settings_.warm == WarmMode::kOnCreate ||
                                 (settings_.warm == WarmMode::kOnJob && plan_.hasReaders));
      };
      if (!warmAllowed() && pass != donePass) {
        phase_ = Phase::kOnDemand;
        message_ = (plan_.paused ? std::string("warming is paused")
                    : settings_.warm == WarmMode::kNever
                        ? std::string("warm: Never")
                        : std::string("warm: OnJob; no job has asked for warming yet")) +
                   "; files are cached as they are read";
        passDone_ = true;
        changed_.notify_all();
      }
      changed_.wait(lock, stop, [&] {
        return passRequested_ != pass || (passRequested_ != donePass && warmAllowed());
      });
      if (stop.stop_requested()) return;
      if (passRequested_ != pass) continue;
      phase_ = Phase::kWarming;
      message_.clear();
      passDone_ = false;
    }
    warmPass(stop);
    if (stop.stop_requested()) return;
    std::unique_lock lock(mutex_);
    if (passRequested_ != pass) continue;  // interrupted by a change: start over
    refreshCachedLocked();
    if (metrics_) metrics_->diskFull.set(diskFull_ ? 1 : 0);
    const auto cached = std::to_string(progress_.cachedBytes) + " of " +
                        std::to_string(progress_.ownedBytes) + " owned bytes cached";
    if (!changedFiles_.empty()) {
      phase_ = Phase::kDegraded;
      message_ = std::to_string(changedFiles_.size()) +
                 " files changed at the origin since they were listed and are not served (" +
                 someOf(changedFiles_) +
                 "); change the Dataset's spec (a new generation) to list them again";
    } else if (diskFull_) {
      // Room may return (a temporary file removed, another dataset purged): the same pass again,
      // later, for as long as it takes. Readers are served from the origin meanwhile.
      const auto delay = diskRetry.next();
      phase_ = Phase::kDegraded;
      message_ = "the cache directories are full (" + lastError_ + "); " + cached +
                 "; trying again in " + std::to_string((delay.count() + 999) / 1000) + "s";
      passDone_ = true;
      changed_.notify_all();
      const std::string error = lastError_;  // reads write it under the lock meanwhile
      lock.unlock();
      log.warn("cache directories full", {{"error", error}, {"retry_in_ms", delay.count()}});
      node_.clock.sleepUntil(node_.clock.monoNow() + delay, stop);
      continue;
    } else if (failedChunks_ > 0 && retry.attempts() < kWarmAttempts) {
      message_ = std::to_string(failedChunks_) + " chunks failed (" + lastError_ + "); retrying";
      const auto delay = retry.next();
      const int64_t failed = failedChunks_;
      lock.unlock();
      log.warn("warm pass incomplete", {{"failed_chunks", failed}, {"retry_in_ms", delay.count()}});
      node_.clock.sleepUntil(node_.clock.monoNow() + delay, stop);
      continue;  // the same pass again: cached chunks are skipped
    } else if (failedChunks_ > 0) {
      phase_ = Phase::kDegraded;
      message_ = std::to_string(failedChunks_) + " chunks could not be fetched: " + lastError_;
    } else if (progress_.cachedFiles < progress_.ownedFiles) {
      phase_ = Phase::kQuotaFull;  // nothing failed: the quota (or LRU on a full disk) said no
      message_ = quotaFullMessageLocked();
    } else {
      phase_ = Phase::kReady;
      message_.clear();
    }
    message_ = withHintNoteLocked(std::move(message_));
    retry.reset();
    diskRetry.reset();
    donePass = pass;
    passDone_ = true;
    log.info("warm pass done", {{"phase", phaseName(phase_)},
                                {"cached_files", progress_.cachedFiles},
                                {"cached_bytes", progress_.cachedBytes}});
    changed_.notify_all();
  }
}

void DatasetCache::countOwnedShare(std::stop_token stop) {
  std::vector<std::string> nodes;
  int replicas;
  {
    std::lock_guard lock(mutex_);
    nodes = settings_.nodeSet;
    replicas = settings_.replicas;
  }
  int64_t ownedFiles = 0, ownedBytes = 0, ownedEmpty = 0;
  std::string cursor;
  while (!stop.stop_requested()) {
    auto batch = node_.manifests.files(id_, cursor, kScanBatch);
    if (!batch.isOk() || batch->empty()) break;
    for (const auto& file : *batch) {
      if (!owns(node_.nodeName, file.path, nodes, replicas)) continue;
      ++ownedFiles, ownedBytes += file.size;
      if (file.size == 0) ++ownedEmpty;
    }
  }
  std::lock_guard lock(mutex_);
  progress_.ownedFiles = ownedFiles;
  progress_.ownedBytes = ownedBytes;
  ownedEmptyFiles_ = ownedEmpty;
  shareCounted_ = true;
}

std::string DatasetCache::quotaFullMessageLocked() const {
  const int64_t capacity = policy_->capacityBytes();
  const std::string cached = std::to_string(progress_.cachedBytes) + " of " +
                             std::to_string(progress_.ownedBytes) + " owned bytes cached";
  if (!capacityReached_ && progress_.ownedBytes <= capacity) {
    return "the cache directories filled before the dataset's quota: " + cached +
           "; the rest is read from the origin; free room on the node's cache directories";
  }
  return "the dataset's cache quota is full (" + std::to_string(capacity) +
         " bytes on this node): " + cached +
         "; the rest is read from the origin; raise spec.cache.capacityPerNode to at least " +
         std::to_string(progress_.ownedBytes) + " bytes" +
         (settings_.eviction == Eviction::kPin ? ", or use policy LRU to keep what is read most"
                                               : "");
}

void DatasetCache::warmPass(std::stop_token stop) {
  WarmPlan plan;
  int concurrency;
  {
    std::lock_guard lock(mutex_);
    plan = plan_;
    concurrency = settings_.warmConcurrency;
  }
  std::vector<WarmFile> hinted = hintedFiles(plan);
  WarmPriorities::Turn turn;
  if (node_.priorities != nullptr) turn = node_.priorities->enter(plan.priority);
  {
    std::lock_guard lock(mutex_);
    progress_.warmStart = node_.clock.wallNow();
    queue_.startPass(std::move(hinted));
    turn_ = &turn;
    if (plan_.priority != plan.priority) turn.setPriority(plan_.priority);
    message_ = hintNote_;
    changedFiles_.clear();
    failedChunks_ = 0;
    capacityReached_ = diskFull_ = false;
    lastError_.clear();
  }
  {
    std::vector<std::jthread> workers;
    for (int i = 0; i < concurrency; ++i)
      workers.emplace_back([this, stop, &turn] { warmWorker(stop, turn); });
  }  // joins the workers
  std::lock_guard lock(mutex_);
  turn_ = nullptr;
}

std::vector<std::string> DatasetCache::readAccessOrderFile(const std::string& path,
                                                           std::string& note) {
  const std::string named = "the access-order file \"" + path + "\"";
  auto entry = stat(path);
  if (!entry.isOk() || entry->directory) {
    note = named + " is not a file of the dataset; warming in the default order";
    return {};
  }
  if (entry->size > kMaxAccessOrderFileBytes) {
    note = named + " is larger than " + std::to_string(kMaxAccessOrderFileBytes >> 20) +
           " MiB; warming in the default order";
    return {};
  }
  auto text = read(path, 0, entry->size);
  if (!text.isOk()) {
    note = named + " could not be read (" + text.status().message() +
           "); warming in the default order";
    return {};
  }
  return parseAccessOrder(*text);
}

std::vector<WarmFile> DatasetCache::hintedFiles(const WarmPlan& plan) {
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
    std::lock_guard lock(mutex_);
    if (ownsLocked(path)) files.push_back({entry->path, entry->size, entry->etag});
  }
  if (unknownCount > 0) {
    note += (note.empty() ? "" : "; ") + std::to_string(unknownCount) +
            " paths of the access order are not files of the dataset and were skipped (" +
            someOf(unknown) + ")";
  }
  std::lock_guard lock(mutex_);
  hintNote_ = std::move(note);
  return files;
}

std::string DatasetCache::withHintNoteLocked(std::string message) const {
  if (hintNote_.empty()) return message;
  return message.empty() ? hintNote_ : message + "; " + hintNote_;
}

bool DatasetCache::bandwidthLimited() const {
  return bandwidth_.rate() > 0 || node_.bandwidth.rate() > 0;
}

void DatasetCache::warmWorker(std::stop_token stop, const WarmPriorities::Turn& turn) {
  while (auto chunk = nextWarmChunk(stop)) {
    const WarmFile& warm = chunk->warmFile();
    const ManifestEntry file{.path = warm.path, .size = warm.size, .etag = warm.version};
    Status status = Status::ok();
    bool fetched = false;
    if (!node_.chunks.contains(chunkId(file.path, chunk->index))) {
      // Datasets of a higher priority fetch first.
      if (!turn.wait(stop)) return;
      if (bandwidthLimited()) {
        // Tokens are scarce: demand reads take them first. Unlimited, warming runs on beside
        // the readers, which then find ahead of them what it fetched.
        std::unique_lock lock(mutex_);
        changed_.wait(lock, stop, [&] { return demandInFlight_.load() == 0; });
      }
      if (stop.stop_requested()) return;
      auto got = fetchChunk(file, chunk->index, FetchKind::kWarm);
      status = got.status();
      if (status.isOk()) {
        std::lock_guard lock(mutex_);
        fetched = true;
        // The chunk may have come from a fill that could not be kept.
        if (!node_.chunks.contains(chunkId(file.path, chunk->index)))
          status = resourceExhausted(lastError_.empty() ? "not kept" : lastError_);
      }
    }
    finishWarmChunk(*chunk, status, fetched);
  }
}

std::optional<WarmChunk> DatasetCache::nextWarmChunk(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  const uint64_t pass = passRequested_;
  while (!stop.stop_requested() && !stopping_ && pass == passRequested_ && !plan_.paused &&
         !capacityReached_ && !diskFull_) {
    if (auto chunk = queue_.next()) return chunk;
    if (!queue_.needsScan()) return std::nullopt;
    auto batch = node_.manifests.files(id_, queue_.cursor(), kScanBatch);
    if (!batch.isOk()) {
      ++failedChunks_, lastError_ = batch.status().message();
      queue_.addScan({}, /*last=*/true);
      continue;
    }
    std::vector<WarmFile> owned;
    for (auto& file : *batch) {
      if (!file.directory && ownsLocked(file.path))
        owned.push_back({std::move(file.path), file.size, std::move(file.etag)});
    }
    queue_.addScan(std::move(owned), /*last=*/batch->empty());
  }
  return std::nullopt;
}

void DatasetCache::finishWarmChunk(const WarmChunk& chunk, const Status& status, bool fetched) {
  std::lock_guard lock(mutex_);
  // A change at the origin is counted by fetchChunk, a full disk by keep(); the rest is retried.
  const bool failed = !status.isOk() && status.code() != StatusCode::kFailedPrecondition &&
                      status.code() != StatusCode::kResourceExhausted;
  if (failed) ++failedChunks_, lastError_ = status.message();
  if (queue_.finish(chunk, status.isOk(), fetched) && metrics_) metrics_->warmFiles.increment();
}

// ---- state ----

DatasetState DatasetCache::state() {
  std::lock_guard lock(mutex_);
  refreshCachedLocked();
  DatasetState state;
  state.phase = phase_;
  state.message = message_;
  if (phase_ == Phase::kOnDemand && capacityReached_) {
    state.phase = Phase::kQuotaFull;
    state.message = quotaFullMessageLocked();
  } else if (phase_ == Phase::kOnDemand && shareCounted_ &&
             progress_.cachedFiles >= progress_.ownedFiles) {
    state.phase = Phase::kReady;  // reads cached the whole share
    state.message = "every owned file is cached (" + message_ + ")";
  }
  state.reads = reads_;
  for (const auto& source : sources_) state.reads.originRetries += source.origin->retries();
  if (metrics_ && state.reads.originRetries > reportedRetries_) {
    metrics_->originRetries.increment(
        static_cast<double>(state.reads.originRetries - reportedRetries_));
    reportedRetries_ = state.reads.originRetries;
  }
  state.capacityBytes = policy_->capacityBytes();
  state.usedBytes = policy_->usedBytes();
  const std::optional<double> rate = fetchRate_.bytesPerSecond(node_.clock.monoNow());
  progress_.bytesPerSecond = rate.value_or(0);
  const int64_t left = progress_.ownedBytes - progress_.cachedBytes;
  if (left <= 0 && phase_ != Phase::kListing) {
    progress_.etaSeconds = 0;
  } else if (phase_ == Phase::kWarming && progress_.bytesPerSecond > 0) {
    progress_.etaSeconds =
        static_cast<int64_t>(std::ceil(static_cast<double>(left) / progress_.bytesPerSecond));
  } else {
    progress_.etaSeconds = -1;  // not warming, or no rate known yet
  }
  state.progress = progress_;
  if (metrics_) {
    metrics_->warmRate.set(progress_.bytesPerSecond);
    metrics_->warmPending.set(
        static_cast<double>(std::max<int64_t>(0, progress_.ownedFiles - progress_.cachedFiles)));
  }
  return state;
}

DatasetState DatasetCache::waitSettled(std::chrono::milliseconds timeout) {
  {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] {
      return stopping_ || phase_ == Phase::kFailed ||
             (passDone_ && phase_ != Phase::kWarming && phase_ != Phase::kListing);
    });
  }
  return state();
}

Result<int64_t> DatasetCache::purge() {
  stopWarming();
  GRANARY_ASSIGN_OR_RETURN(int64_t freed, node_.chunks.dropGeneration(id_));
  GRANARY_RETURN_IF_ERROR(node_.manifests.drop(id_));
  std::lock_guard lock(mutex_);
  policy_ = makePolicy(settings_);
  if (metrics_) metrics_->usedBytes.set(0);
  return freed;
}

}  // namespace granary::cache
