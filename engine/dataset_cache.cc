#include "engine/dataset_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/log.h"
#include "engine/core/placement.h"

namespace granary::cache {
namespace {

constexpr int64_t kMinChunkSize = 4096;
constexpr size_t kScanBatch = 1000;

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

}  // namespace

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
  const int64_t chunkSize = settings.chunkSize, capacity = settings.capacityBytes;
  std::unique_ptr<DatasetCache> cache(
      new DatasetCache(node, std::move(key), std::move(sources), std::move(settings)));
  // What is already on disk (verified by the chunk store at start-up) counts against the quota.
  // A file's chunks come one after another.
  std::string file;
  int64_t fileChunks = 0;
  GRANARY_RETURN_IF_ERROR(node.chunks.forEachChunk(cache->id_, [&](ChunkId&& id, int64_t size) {
    if (id.path != file) {
      file = id.path;
      auto entry = node.manifests.stat(cache->id_, file);
      fileChunks = entry.isOk() ? chunkCount(entry->size, chunkSize) : 0;
    }
    std::vector<std::string> evict;
    {
      MutexLock lock(cache->mutex_);
      if (!cache->policy_->admit(policyId(id.path, id.index), size, evict)) {
        (void)node.chunks.remove(id);  // the quota shrank: it no longer fits
        return;
      }
      if (fileChunks > 0) cache->cachedFiles_.added(id.path, fileChunks);
    }
    cache->dropEvicted(evict);
  }));
  if (cache->metrics_) {
    MutexLock lock(cache->mutex_);
    cache->metrics_->capacityBytes.set(static_cast<double>(capacity));
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
      chunkSize_(settings.chunkSize),
      metrics_(node.metrics ? std::optional(node.metrics->forDataset(key_.label())) : std::nullopt),
      fetcher_(node, key_, std::move(sources),
               {settings.chunkSize, settings.bandwidthLimit, settings.readRetryTime}, *this,
               metrics_ ? &*metrics_ : nullptr),
      settings_(settings),
      policy_(makePolicy(settings_)),
      fetchRate_(node.clock.monoNow()),
      warmer_(node, id_, key_.label(), fetcher_, *this, metrics_ ? &*metrics_ : nullptr,
              std::move(settings)) {}

DatasetCache::~DatasetCache() { stopWarming(); }

void DatasetCache::stopWarming() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.request_stop();  // first: cancels the reads the warmer makes through the cache
  warmer_.stop();
  if (thread_.joinable()) thread_.join();
}

Status DatasetCache::update(DatasetSettings settings) {
  MutexLock lock(mutex_);
  if (settings.chunkSize != settings_.chunkSize || settings.eviction != settings_.eviction ||
      settings.capacityBytes != settings_.capacityBytes) {
    return failedPrecondition(
        "cache.chunk_size_bytes, cache.policy and cache.capacity_bytes are fixed for a "
        "generation: change the Dataset's spec to start a new one");
  }
  std::sort(settings.nodeSet.begin(), settings.nodeSet.end());
  if (std::find(settings.nodeSet.begin(), settings.nodeSet.end(), node_.nodeName) ==
      settings.nodeSet.end()) {
    return invalidArgument("node_set: must include this node (\"" + node_.nodeName + "\")");
  }
  if (settings.bandwidthLimit != settings_.bandwidthLimit)
    fetcher_.setBandwidthLimit(settings.bandwidthLimit);
  fetcher_.setReadRetryTime(settings.readRetryTime);
  settings_ = settings;
  if (settings_.warmConcurrency < 1) settings_.warmConcurrency = 1;
  lock.unlock();  // the warmer is called without this lock
  warmer_.update(std::move(settings));
  return Status::ok();
}

void DatasetCache::setWarmPlan(WarmPlan plan) { warmer_.setPlan(std::move(plan)); }

Status DatasetCache::waitListed() {
  {
    MutexLock lock(mutex_);
    changed_.wait(lock, [this]() GRANARY_REQUIRES(mutex_) {
      return listed_ || stopping_ || listFailed_ || listAwaited_;
    });
    if (listed_) return Status::ok();
  }
  const std::string message = warmer_.standing().message;
  return unavailable("dataset " + key_.label() + " is not listed" +
                     (message.empty() ? std::string() : ": " + message));
}

bool DatasetCache::listed() const {
  MutexLock lock(mutex_);
  return listed_;
}

Result<ManifestEntry> DatasetCache::stat(const std::string& path) {
  if (!listed()) {  // what the listing has found so far is served at once
    if (auto early = node_.manifests.stat(id_, path); early.isOk()) return early;
  }
  GRANARY_RETURN_IF_ERROR(waitListed());
  return node_.manifests.stat(id_, path);
}

Result<ManifestEntry> DatasetCache::statForPeer(const std::string& path) {
  // Real time, as the condition variable waits it (ListingFeed::awaitFollowers does the same).
  const auto giveUp = std::chrono::steady_clock::now() + kPeerPathWait;
  for (;;) {
    if (listed()) return node_.manifests.stat(id_, path);
    if (auto early = node_.manifests.stat(id_, path); early.isOk()) return early;
    MutexLock lock(mutex_);
    const int64_t files = progress_.totalFiles;
    const bool moved = changed_.wait_until(lock, giveUp, [&]() GRANARY_REQUIRES(mutex_) {
      return listed_ || stopping_ || listFailed_ || progress_.totalFiles != files;
    });
    if (!moved || stopping_ || listFailed_)
      return unavailable("cache node " + node_.nodeName + " has not listed \"" + path +
                         "\" of dataset " + key_.label() + " yet");
  }
}

Result<ManifestEntry> DatasetCache::statInode(uint64_t inode) {
  if (!listed()) {
    if (auto early = node_.manifests.statInode(id_, inode); early.isOk()) return early;
  }
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
  return std::min(chunkSize_, file.size - index * chunkSize_);
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
  const int64_t index = offset / chunkSize_;
  const int64_t within = offset - index * chunkSize_;
  return ChunkSpan{index, within, std::min(maxLength, chunkLength(file, index) - within)};
}

Result<Piece> DatasetCache::readPiece(const ManifestEntry& file, int64_t offset,
                                      int64_t maxLength) {
  GRANARY_ASSIGN_OR_RETURN(const ChunkSpan span, spanOf(file, offset, maxLength));
  if (span.length == 0) return Piece{};
  auto local = node_.chunks.read(chunkId(file.path, span.index), span.within, span.length);
  if (local.isOk()) {
    countHit(file, span.index, static_cast<int64_t>(local->size()));
    return Piece{std::move(*local), Source::kLocal};
  }
  GRANARY_ASSIGN_OR_RETURN(const FetchedChunk chunk, readMissing(file, span, local.status()));
  const auto within = static_cast<size_t>(span.within);
  if (chunk.bytes->size() <= within) return Piece{{}, chunk.source};
  return Piece{chunk.bytes->substr(within, static_cast<size_t>(span.length)), chunk.source};
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
  GRANARY_ASSIGN_OR_RETURN(const FetchedChunk chunk, readMissing(file, span, local.status()));
  return copyPiece(chunk, span, buffer);
}

Result<ChunkPiece> DatasetCache::readPieceInMemory(const ManifestEntry& file, int64_t offset,
                                                   int64_t maxLength, bool fetch) {
  GRANARY_ASSIGN_OR_RETURN(const ChunkSpan span, spanOf(file, offset, maxLength));
  if (span.length == 0) return ChunkPiece{};
  const auto pieceOf = [&span](FetchedChunk chunk) {
    const int64_t size = std::clamp<int64_t>(
        static_cast<int64_t>(chunk.bytes->size()) - span.within, 0, span.length);
    return ChunkPiece{std::move(chunk), span.within, size};
  };
  if (auto held = fetcher_.held(file, span.index)) {  // read from memory, no wait
    ChunkPiece piece = pieceOf(std::move(*held));
    countRead(piece.chunk.source, piece.size, false);
    return piece;
  }
  if (!fetch)
    return notFound("chunk " + std::to_string(span.index) + " of \"" + file.path +
                    "\" is not held in memory");
  GRANARY_ASSIGN_OR_RETURN(FetchedChunk chunk, readMissing(file, span, notFound("not on disk")));
  return pieceOf(std::move(chunk));
}

PieceRead DatasetCache::copyPiece(const FetchedChunk& chunk, const ChunkSpan& span,
                                  std::span<char> buffer) {
  const int64_t length =
      std::clamp<int64_t>(static_cast<int64_t>(chunk.bytes->size()) - span.within, 0, span.length);
  std::memcpy(buffer.data(), chunk.bytes->data() + span.within, static_cast<size_t>(length));
  return PieceRead{length, chunk.source};
}

bool DatasetCache::heldInOneChunk(const ManifestEntry& file) const {
  return !file.directory && chunkCount(file.size, chunkSize_) == 1;
}

Result<OwnedFd> DatasetCache::openCached(const ManifestEntry& file) {
  if (!heldInOneChunk(file))
    return failedPrecondition("\"" + file.path + "\" is not held in one chunk");
  auto opened = node_.chunks.openVerified(chunkId(file.path, 0));
  if (!opened.isOk()) {
    forgetIfDamaged(file.path, 0, opened.status());
    return opened.status();
  }
  return opened;
}

void DatasetCache::countPassedThrough(const ManifestEntry& file) { countHit(file, 0, file.size); }

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
    MutexLock lock(mutex_);
    policy_->touch(policyId(file.path, index));
  }
  countRead(Source::kLocal, bytes, true);
}

Result<FetchedChunk> DatasetCache::readMissing(const ManifestEntry& file, const ChunkSpan& span,
                                               const Status& local) {
  if (local.code() != StatusCode::kNotFound && !forgetIfDamaged(file.path, span.index, local))
    return local;
  bool owner;
  {
    MutexLock lock(mutex_);
    owner = ownsLocked(file.path);
  }
  // While warming, the rest of a file a reader waits on goes first; a file another node keeps is
  // read a chunk ahead.
  if (owner) warmer_.demand({file.path, file.size, file.etag});
  if (!owner) readAhead(file, span.index + 1);
  GRANARY_ASSIGN_OR_RETURN(FetchedChunk chunk, fetchChunk(file, span.index, FetchKind::kDemand));
  const auto available = static_cast<int64_t>(chunk.bytes->size()) - span.within;
  if (available > 0) countRead(chunk.source, std::min(span.length, available), false);
  return chunk;
}

void DatasetCache::readAhead(const ManifestEntry& file, int64_t next) {
  if (next >= chunkCount(file.size, chunkSize_) || fetcher_.held(file, next) ||
      node_.chunks.contains(chunkId(file.path, next)))
    return;
  readAhead_.start(chunkId(file.path, next).key(),
                   [this, file, next] { (void)fetchChunk(file, next, FetchKind::kDemand); });
}

Result<ManifestEntry> DatasetCache::fileForPeer(const std::string& path, int64_t index,
                                                const std::string& etag) {
  GRANARY_ASSIGN_OR_RETURN(ManifestEntry file, statForPeer(path));
  if (file.directory) return failedPrecondition("\"" + path + "\" is a directory");
  if (etag != file.etag) {
    return failedPrecondition("\"" + path + "\": the caller's version differs from this node's");
  }
  if (index < 0 || index >= chunkCount(file.size, chunkSize_))
    return invalidArgument("chunk index out of range");
  return file;
}

Result<FetchedChunk> DatasetCache::fillForPeer(const ManifestEntry& file, int64_t index,
                                               bool fill) {
  bool owner;
  {
    MutexLock lock(mutex_);
    owner = ownsLocked(file.path);
  }
  if (!fill || !owner) return notFound("chunk is not cached on " + node_.nodeName);
  return fetchChunk(file, index, FetchKind::kWarm);
}

Result<std::shared_ptr<const std::string>> DatasetCache::readChunkForPeer(const std::string& path,
                                                                          int64_t index,
                                                                          const std::string& etag,
                                                                          bool fill) {
  GRANARY_ASSIGN_OR_RETURN(const ManifestEntry file, fileForPeer(path, index, etag));
  auto local = node_.chunks.read(chunkId(path, index));
  if (local.isOk()) return std::make_shared<const std::string>(std::move(*local));
  forgetIfDamaged(path, index, local.status());
  GRANARY_ASSIGN_OR_RETURN(FetchedChunk chunk, fillForPeer(file, index, fill));
  return std::move(chunk.bytes);
}

Result<PeerChunk> DatasetCache::openChunkForPeer(const std::string& path, int64_t index,
                                                 const std::string& etag, bool fill) {
  GRANARY_ASSIGN_OR_RETURN(const ManifestEntry file, fileForPeer(path, index, etag));
  const ChunkId id = chunkId(path, index);
  auto opened = node_.chunks.openWithChecksums(id);
  if (!opened.isOk()) {
    forgetIfDamaged(path, index, opened.status());
    GRANARY_ASSIGN_OR_RETURN(FetchedChunk chunk, fillForPeer(file, index, fill));
    opened = node_.chunks.openWithChecksums(id);  // kept by the fill, most often
    if (!opened.isOk()) {
      PeerChunk sent;
      sent.bytes = std::move(chunk.bytes);
      sent.size = static_cast<int64_t>(sent.bytes->size());
      sent.checksums = ChunkStore::blockChecksums(*sent.bytes);
      return sent;
    }
  }
  return PeerChunk{.file = std::move(opened->file),
                   .size = opened->size,
                   .checksums = std::move(opened->checksums)};
}

bool DatasetCache::forgetIfDamaged(const std::string& path, int64_t index, const Status& local) {
  if (local.code() != StatusCode::kCorruption) return false;
  if (metrics_) metrics_->damagedChunks.increment();
  MutexLock lock(mutex_);
  policy_->forget(policyId(path, index));
  cachedFiles_.removed(path);
  return true;
}

bool DatasetCache::ownsLocked(const std::string& path) const {
  return owns(node_.nodeName, path, settings_.nodeSet, settings_.replicas);
}

Result<FetchedChunk> DatasetCache::fetchChunk(const ManifestEntry& file, int64_t index,
                                              FetchKind kind) {
  return fetcher_.fetch(file, index, kind, thread_.get_stop_token());
}

std::vector<std::string> DatasetCache::ownersOf(const std::string& path) {
  MutexLock lock(mutex_);
  return cache::ownersOf(path, settings_.nodeSet, settings_.replicas);
}

void DatasetCache::countFetched(int64_t bytes) {
  MutexLock lock(mutex_);
  fetchRate_.add(node_.clock.monoNow(), bytes);
}

void DatasetCache::changedAtOrigin(const std::string& path) { warmer_.changedAtOrigin(path); }

void DatasetCache::countReaderRetry() {
  MutexLock lock(mutex_);
  ++reads_.originRetries;
}

Status DatasetCache::keep(const ChunkId& id, const std::string& data, int64_t fileChunks) {
  return keepWith(id, static_cast<int64_t>(data.size()), fileChunks,
                  [&] { return node_.chunks.put(id, data); });
}

Status DatasetCache::keepShared(const ChunkId& from, const ChunkId& to, int64_t size,
                                int64_t fileChunks) {
  return keepWith(to, size, fileChunks, [&] { return node_.chunks.link(from, to); });
}

Status DatasetCache::keepWith(const ChunkId& id, int64_t size, int64_t fileChunks,
                              const std::function<Status()>& store) {
  const std::string pid = policyId(id.path, id.index);
  const bool replacing = node_.chunks.contains(id);
  std::vector<std::string> evict;
  bool admitted;
  {
    MutexLock lock(mutex_);
    admitted = policy_->admit(pid, size, evict);
    if (admitted) {
      writing_.insert(pid);
      writingBytes_ += size;
    }
  }
  if (!admitted) {
    warmer_.capacityReached();
    return resourceExhausted("the dataset's cache quota is full");
  }
  dropEvicted(evict);
  Status put = store();
  // The disk filled before the quota did: the policy gives up chunks (LRU: its least recently
  // used) until this one fits, or gives up nothing (Pin).
  while (put.code() == StatusCode::kResourceExhausted) {
    {
      MutexLock lock(mutex_);
      evict = policy_->shrink(size, pid);
    }
    if (evict.empty()) break;
    warmer_.evictedForRoom();
    dropEvicted(evict);
    put = store();
  }
  {
    MutexLock lock(mutex_);
    writing_.erase(pid);
    writingBytes_ -= size;
    if (!put.isOk()) {
      policy_->forget(pid);
    } else if (!policy_->holds(pid)) {
      (void)node_.chunks.remove(id);  // another fetch evicted it while it was written
    } else if (!replacing) {
      cachedFiles_.added(id.path, fileChunks);
    }
    if (metrics_) metrics_->usedBytes.set(static_cast<double>(policy_->usedBytes()));
  }
  if (!put.isOk()) warmer_.keepFailed(put);
  return put;
}

void DatasetCache::dropEvicted(const std::vector<std::string>& evicted) {
  MutexLock lock(mutex_);  // no fetch of the same chunk may admit it meanwhile
  for (const auto& doomed : evicted) {
    if (writing_.contains(doomed)) continue;  // its writer removes it when done
    const auto [path, index] = parsePolicyId(doomed);
    (void)node_.chunks.remove(chunkId(path, index));
    cachedFiles_.removed(path);
  }
}

void DatasetCache::refreshCachedLocked() {
  progress_.cachedBytes = policy_->usedBytes() - writingBytes_;
  progress_.cachedFiles = cachedFiles_.complete() + ownedEmptyFiles_;
}

void DatasetCache::countRead(Source source, int64_t bytes, bool hit) {
  {
    MutexLock lock(mutex_);
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

// ---- the owned share, for the warmer ----

void DatasetCache::countOwnedShare(std::stop_token stop) {
  std::vector<std::string> nodes;
  int replicas;
  ListedShare listed;
  {
    MutexLock lock(mutex_);
    nodes = settings_.nodeSet;
    replicas = settings_.replicas;
    listed = listedShare_;
  }
  const auto totals = node_.manifests.totals(id_);
  const bool listedWhole = totals.isOk() && listed.files == totals->files &&
                           listed.nodeSet == nodes && listed.replicas == replicas;
  const OwnedCount owned = listedWhole ? listed.owned : scanOwnedShare(nodes, replicas, stop);
  MutexLock lock(mutex_);
  progress_.ownedFiles = owned.files;
  progress_.ownedBytes = owned.bytes;
  ownedEmptyFiles_ = owned.empty;
  shareCounted_ = true;
}

DatasetCache::OwnedCount DatasetCache::scanOwnedShare(const std::vector<std::string>& nodes,
                                                      int replicas, std::stop_token stop) const {
  OwnedCount owned;
  std::string cursor;
  while (!stop.stop_requested()) {
    auto batch = node_.manifests.files(id_, cursor, kScanBatch);
    if (!batch.isOk() || batch->empty()) break;
    owned.add(*batch, node_.nodeName, nodes, replicas);
  }
  return owned;
}

void DatasetCache::beginListedShare() {
  MutexLock lock(mutex_);
  listedShare_ = {.nodeSet = settings_.nodeSet, .replicas = settings_.replicas};
}

void DatasetCache::countListed(std::span<const ManifestEntry> batch) {
  std::vector<std::string> nodes;
  int replicas;
  {
    MutexLock lock(mutex_);
    nodes = listedShare_.nodeSet;
    replicas = listedShare_.replicas;
  }
  OwnedCount owned;
  owned.add(batch, node_.nodeName, nodes, replicas);
  MutexLock lock(mutex_);
  listedShare_.files += static_cast<int64_t>(batch.size());
  listedShare_.owned += owned;
}

void DatasetCache::OwnedCount::add(std::span<const ManifestEntry> batch, std::string_view node,
                                   std::span<const std::string> nodes, int replicas) {
  for (const ManifestEntry& file : batch) {
    if (!owns(node, file.path, nodes, replicas)) continue;
    ++files, bytes += file.size;
    if (file.size == 0) ++empty;
  }
}

DatasetCache::OwnedCount& DatasetCache::OwnedCount::operator+=(const OwnedCount& other) {
  files += other.files, bytes += other.bytes, empty += other.empty;
  return *this;
}

ShareFacts DatasetCache::shareFacts() {
  MutexLock lock(mutex_);
  refreshCachedLocked();
  return shareFactsLocked();
}

ShareFacts DatasetCache::shareFactsLocked() const {
  return {.ownedFiles = progress_.ownedFiles,
          .ownedBytes = progress_.ownedBytes,
          .cachedFiles = progress_.cachedFiles,
          .cachedBytes = progress_.cachedBytes,
          .capacityBytes = policy_->capacityBytes(),
          .pin = settings_.eviction == Eviction::kPin};
}

// ---- state ----

DatasetState DatasetCache::state() {
  const WarmStanding warm = warmer_.standing();
  const Phase phase = warm.phase;
  MutexLock lock(mutex_);
  refreshCachedLocked();
  progress_.warmStart = warm.warmStart;
  DatasetState state;
  state.phase = phase;
  state.message = warm.message;
  if (phase == Phase::kOnDemand && warm.capacityReached) {
    ShareFacts share = shareFactsLocked();
    share.capacityReached = true;
    state.phase = Phase::kQuotaFull;
    state.message = quotaFullMessage(share);
  } else if (phase == Phase::kOnDemand && shareCounted_ &&
             progress_.cachedFiles >= progress_.ownedFiles) {
    state.phase = Phase::kReady;  // reads cached the whole share
    state.message = "every owned file is cached (" + warm.message + ")";
  }
  state.reads = reads_;
  state.reads.originRetries += fetcher_.originRetries();
  state.goneFromOrigin = fetcher_.goneFromOrigin();
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
  if (left <= 0 && phase != Phase::kListing) {
    progress_.etaSeconds = 0;
  } else if (phase == Phase::kWarming && progress_.bytesPerSecond > 0) {
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
  warmer_.waitSettled(timeout);
  return state();
}

Result<int64_t> DatasetCache::purge() {
  stopWarming();
  GRANARY_ASSIGN_OR_RETURN(int64_t freed, node_.chunks.dropGeneration(id_));
  GRANARY_RETURN_IF_ERROR(node_.manifests.drop(id_));
  MutexLock lock(mutex_);
  policy_ = makePolicy(settings_);
  if (metrics_) metrics_->usedBytes.set(0);
  return freed;
}

}  // namespace granary::cache
