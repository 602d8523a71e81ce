// One dataset generation on this node: its manifest, its share of the chunks, and the warmer
// that fills that share. Every read is served local → peer → origin, and concurrent misses on
// one chunk share one fetch.
//
// Lifecycle: create() starts a background thread that lists the origins into the manifest
// (once per generation: a completed listing survives restarts), then warms the chunks this node
// owns under rendezvous placement, as the warm mode and plan allow. Chunks already on disk
// (verified at start-up by the chunk store) are counted, not fetched again.
//
// Warming hands out chunks in the order of a WarmQueue (engine/core/warm_queue.h): the rest of a
// file a reader is waiting on, then the access-order hint, then the manifest. Demand reads never
// wait for warming; under a bandwidth limit they also go first (warm fetches wait while a demand
// fetch is in flight), and without one warming runs on beside them, ahead of the readers. Between
// datasets, the node's WarmPriorities let the highest priority warming fetch first. A chunk this
// node does not own is asked of its first owner with `fill` (the owner fetches it from the origin
// if it must), so the origin is read once per dataset; other owners and then the origin are the
// fallbacks. A file whose origin pins it only by its size (isSizeVersion) is read whole from the
// origin, never from peers, so that no file is assembled from two of its versions.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "engine/cache_metrics.h"
#include "engine/core/bandwidth_limiter.h"
#include "engine/core/cached_files.h"
#include "engine/core/eviction.h"
#include "engine/core/rate_meter.h"
#include "engine/core/single_flight.h"
#include "engine/core/warm_priorities.h"
#include "engine/core/warm_queue.h"
#include "engine/origin/origin.h"
#include "engine/store/chunk_store.h"
#include "engine/store/manifest_store.h"

namespace granary::cache {

// A dataset generation as the API names it.
struct DatasetKey {
  std::string ns;
  std::string name;
  int64_t generation = 0;
  std::string uid;

  // "namespace/name/generation/uid": the key of its manifest and chunks.
  std::string id() const;
  // "namespace/name": the dataset label of metrics.
  std::string label() const { return ns + "/" + name; }
};

// A source shown at a sub-directory of the dataset ("" is the root).
struct DatasetSource {
  std::string mount;
  std::unique_ptr<Origin> origin;
};

enum class Eviction { kPin, kLru };
enum class WarmMode { kOnCreate, kOnJob, kNever };

struct DatasetSettings {
  std::vector<std::string> nodeSet;  // every node caching the dataset, this one included
  int replicas = 1;
  int64_t chunkSize = 16 << 20;
  int64_t capacityBytes = 0;  // the dataset's quota on this node
  Eviction eviction = Eviction::kPin;
  WarmMode warm = WarmMode::kOnCreate;
  int warmConcurrency = 8;     // origin fetches in flight while warming
  int64_t bandwidthLimit = 0;  // this dataset's origin reads, bytes per second; 0 unlimited
  // First pause before a pass retries chunks that failed; doubles up to a minute.
  std::chrono::milliseconds warmRetryDelay{1000};
  // How long a reader's fetch from the origin retries what fails for a moment (Unavailable: the
  // origin down, a body shorter than its range) before the read fails.
  std::chrono::milliseconds readRetryTime{30'000};
};

// Warm control from the operator: order, pause, priority, and whether a job reads the dataset
// (which starts warming under WarmMode::kOnJob).
struct WarmPlan {
  // Paths in the order readers open them: warmed first, in this order.
  std::vector<std::string> accessOrder;
  // A file of the dataset listing more such paths, one a line (parseAccessOrder), warmed after
  // accessOrder's; "" none. Read through the cache once listed. Paths not in the manifest and a
  // missing file are said in the status message, never a failure.
  std::string accessOrderFile;
  bool paused = false;
  bool hasReaders = false;
  // Higher warms first when several datasets of the node warm at once (WarmPriorities).
  int priority = 0;
};

// Where chunks this node does not hold come from: the other cache nodes (the gRPC adapter).
class PeerReader {
 public:
  virtual ~PeerReader() = default;
  // Chunk `index` of `path`, whole and verified, from `node`. With `fill`, that node fetches it
  // from the origin when it has not cached it. FailedPrecondition when the versions differ.
  virtual Result<std::string> readChunk(const std::string& node, const DatasetKey& dataset,
                                        const std::string& path, int64_t index,
                                        const std::string& etag, bool fill) = 0;
};

// The node-wide parts every dataset shares. They outlive the datasets.
struct NodeContext {
  std::string nodeName;
  ManifestStore& manifests;
  ChunkStore& chunks;
  BandwidthLimiter& bandwidth;
  Clock& clock;
  PeerReader* peers = nullptr;      // null: this node asks no peers
  CacheMetrics* metrics = nullptr;  // null: not exported
  // Which dataset's warm fetches go first; null: datasets warm side by side whatever their
  // priority.
  WarmPriorities* priorities = nullptr;
};

// What a dataset generation on this node is doing. Every phase but kPending, kListing and kFailed
// serves reads (a miss is read through from a peer or the origin).
//   kReady:     every file of this node's owned share is cached and verified.
//   kOnDemand:  not warmed by policy (warm: Never; OnJob before a plan asked for warming; paused):
//               files are cached as they are read. Turns kReady once reads cached the share.
//   kQuotaFull: the quota filled before the owned share was cached (Pin stops there; LRU keeps
//               the most recently used): what is cached stays, the rest comes from the origin.
enum class Phase {
  kPending,
  kListing,
  kWarming,
  kReady,
  kDegraded,
  kFailed,
  kOnDemand,
  kQuotaFull
};
enum class Source { kLocal, kPeer, kOrigin };

struct ReadTotals {
  int64_t localBytes = 0;
  int64_t peerBytes = 0;
  int64_t originBytes = 0;
  int64_t chunkHits = 0;
  int64_t chunkMisses = 0;
  int64_t originRetries = 0;  // origin requests retried after transient failures
};

struct WarmProgress {
  int64_t totalFiles = 0;
  int64_t totalBytes = 0;
  int64_t ownedFiles = 0;
  int64_t ownedBytes = 0;
  int64_t cachedFiles = 0;  // of the owned share, complete and verified
  int64_t cachedBytes = 0;
  // Bytes this node fetched for its share (from the origin or peers, once per fetch; never what
  // was on disk already) per second over the last 5 s; 0 while unknown (the first second).
  double bytesPerSecond = 0;
  // While warming, the owned bytes left over bytesPerSecond; 0 once every owned byte is cached;
  // -1 when unknown (no rate yet, or not warming).
  int64_t etaSeconds = -1;
  Clock::WallTime warmStart{};
};

struct DatasetState {
  Phase phase = Phase::kPending;
  std::string message;  // why the phase is what it is
  WarmProgress progress;
  ReadTotals reads;
  int64_t capacityBytes = 0;
  int64_t usedBytes = 0;
};

// A piece of a file read from within one chunk.
struct Piece {
  std::string data;
  Source source = Source::kLocal;
};

// The same read into a caller's buffer: how many bytes, and from where.
struct PieceRead {
  int64_t size = 0;
  Source source = Source::kLocal;
};

class DatasetCache {
 public:
  // InvalidArgument for no sources, an empty node set without this node, replicas < 1 or a
  // chunk size < 4 KiB. Starts listing (and warming) in the background.
  static Result<std::unique_ptr<DatasetCache>> create(NodeContext& node, DatasetKey key,
                                                      std::vector<DatasetSource> sources,
                                                      DatasetSettings settings);
  ~DatasetCache();  // stops the warmer and waits for its fetches
  DatasetCache(const DatasetCache&) = delete;
  DatasetCache& operator=(const DatasetCache&) = delete;

  const DatasetKey& key() const { return key_; }

  // A new node set, warm mode or concurrency (chunk size and eviction are fixed for a
  // generation). A changed node set starts a new warm pass.
  Status update(DatasetSettings settings);
  void setWarmPlan(WarmPlan plan);

  // Waits for the listing. NotFound for paths not in the manifest.
  Result<ManifestEntry> stat(const std::string& path);
  Result<ManifestEntry> statInode(uint64_t inode);  // NotFound for inodes not in the manifest
  Result<std::vector<ManifestEntry>> list(const std::string& directory, const std::string& after,
                                          size_t limit);
  // Reads from `offset` of a file to the end of the chunk holding it, at most `maxLength`
  // bytes; empty at or past the end of the file.
  Result<Piece> readPiece(const std::string& path, int64_t offset, int64_t maxLength);
  // The same for a file already looked up (`file` must come from this dataset's manifest).
  Result<Piece> readPiece(const ManifestEntry& file, int64_t offset, int64_t maxLength);
  // The same into the start of `buffer` (room for `maxLength` bytes), past this node's page
  // cache (ChunkStore::readInto): for a reader with a page cache of its own. Without `fetch`,
  // NotFound instead of fetching a chunk this node does not hold.
  Result<PieceRead> readPieceInto(const ManifestEntry& file, int64_t offset, int64_t maxLength,
                                  std::span<char> buffer, bool fetch = true);
  // Reads `length` bytes (-1: to the end) from `offset`, chunk by chunk.
  Result<std::string> read(const std::string& path, int64_t offset, int64_t length);
  // For a peer: chunk `index` of `path`, whole and verified. With `fill`, fetched (and kept)
  // when this node owns the file; NotFound otherwise. FailedPrecondition when `etag` is not the
  // listed version.
  Result<std::string> readChunkForPeer(const std::string& path, int64_t index,
                                       const std::string& etag, bool fill);
  bool hasChunk(const std::string& path, int64_t index) const;

  DatasetState state();
  // Waits until warming has nothing left to do (Ready, Degraded or Failed) or `timeout`
  // passes; returns the state then.
  DatasetState waitSettled(std::chrono::milliseconds timeout);

  // Stops warming and removes the generation's chunks and manifest; returns the bytes freed.
  Result<int64_t> purge();

 private:
  enum class FetchKind { kDemand, kWarm };

  DatasetCache(NodeContext& node, DatasetKey key, std::vector<DatasetSource> sources,
               DatasetSettings settings);
  void stopWarming();  // ends the background thread; readers waiting for the listing return
  void run(std::stop_token stop);
  Status listOrigins(std::stop_token stop);
  // Counts the files and bytes this node owns under the current node set into the progress.
  void countOwnedShare(std::stop_token stop);
  // Why kQuotaFull: which limit, what is cached, and the fix.
  std::string quotaFullMessageLocked() const;
  void warmPass(std::stop_token stop);
  // The plan's access-order hint (its paths, then its file's) as owned files of the manifest, in
  // order; sets hintNote_ to what the status says of it (unknown paths, a missing file).
  std::vector<WarmFile> hintedFiles(const WarmPlan& plan);
  // The plan's access-order file's paths; a note for the status when it cannot be read.
  std::vector<std::string> readAccessOrderFile(const std::string& path, std::string& note);
  void warmWorker(std::stop_token stop, const WarmPriorities::Turn& turn);
  bool bandwidthLimited() const;  // a dataset or node token bucket is set
  std::optional<WarmChunk> nextWarmChunk(std::stop_token stop);
  void finishWarmChunk(const WarmChunk& chunk, const Status& status, bool fetched);
  // `message` with hintNote_ after it.
  std::string withHintNoteLocked(std::string message) const;
  Status waitListed();  // Unavailable when listing failed or the dataset is stopping
  // When a local read of a chunk found it damaged (the store dropped it): counts it and makes
  // the eviction policy forget it, so that it is fetched again. Whether it was damaged.
  bool forgetIfDamaged(const std::string& path, int64_t index, const Status& local);
  bool ownsLocked(const std::string& path) const;

  // Where a read of `file` from `offset` falls: chunk `index`, `within` it, `length` bytes
  // (0 at or past the end of the file). InvalidArgument for a negative offset or length,
  // FailedPrecondition for a directory.
  struct ChunkSpan {
    int64_t index = 0, within = 0, length = 0;
  };
  Result<ChunkSpan> spanOf(const ManifestEntry& file, int64_t offset, int64_t maxLength) const;
  void countHit(const ManifestEntry& file, int64_t index, int64_t bytes);
  // A read the local store could not serve (`local`): fetched when the chunk is missing or was
  // damaged; other errors are returned.
  Result<Piece> readMissing(const ManifestEntry& file, const ChunkSpan& span, const Status& local);
  Result<Piece> fetchChunk(const ManifestEntry& file, int64_t index, FetchKind kind);
  Result<Piece> fetchUncached(const ManifestEntry& file, int64_t index, FetchKind kind);
  // Chunk `index` of a file pinned only by its size, from one origin read of the whole file
  // shared by every chunk asked for meanwhile.
  Result<Piece> fetchFromWholeFile(const ManifestEntry& file, int64_t index, FetchKind kind);
  Result<std::shared_ptr<const std::string>> fetchWholeFile(const ManifestEntry& file,
                                                            FetchKind kind);
  // FailedPrecondition when `whole` differs from what this node read of the file before: a
  // chunk on disk, or the content the first whole read pinned.
  Status pinContent(const ManifestEntry& file, const std::string& whole);
  // Keeps the chunks of `whole` this node does not hold yet (the caller owns the file).
  void keepWhole(const ManifestEntry& file, const std::string& whole, FetchKind kind);
  // Counts `bytes` kept by a warm fetch in granary_cache_warm_bytes_total.
  void countWarmed(FetchKind kind, int64_t bytes);
  // Counts `bytes` of this node's share fetched from the origin or a peer in the warm rate.
  void countFetched(int64_t bytes);
  Result<std::string> readOrigin(const ManifestEntry& file, int64_t offset, int64_t length);
  // readOrigin for a reader, retried with backoff within settings_.readRetryTime.
  Result<std::string> readOriginForReader(const ManifestEntry& file, int64_t offset,
                                          int64_t length);
  // Stores a fetched chunk of a file of `fileChunks` chunks, as the eviction policy allows.
  Status keep(const ChunkId& id, const std::string& data, int64_t fileChunks);
  // Removes chunks the eviction policy gave up.
  void dropEvicted(const std::vector<std::string>& evicted);
  // Sets the progress's cached files and bytes from what is on disk.
  void refreshCachedLocked();
  ChunkId chunkId(const std::string& path, int64_t index) const;
  int64_t chunkLength(const ManifestEntry& file, int64_t index) const;
  void countRead(Source source, int64_t bytes, bool hit);
  void setPhase(Phase phase, std::string message);

  NodeContext& node_;
  const DatasetKey key_;
  const std::string id_;
  const std::vector<DatasetSource> sources_;
  SingleFlight<Piece> flights_;
  SingleFlight<std::shared_ptr<const std::string>> wholeFiles_;  // by path
  std::atomic<int> demandInFlight_{0};
  std::optional<DatasetMetrics> metrics_;
  BandwidthLimiter bandwidth_;  // the dataset's own limit, within the node's

  mutable std::mutex mutex_;             // guards everything below
  std::condition_variable_any changed_;  // any state change; the thread waits with its token
  DatasetSettings settings_;
  WarmPlan plan_;
  Phase phase_ = Phase::kPending;
  std::string message_;
  bool listed_ = false;
  bool stopping_ = false;
  uint64_t passRequested_ = 1;  // bumped by a node-set or plan change
  bool passDone_ = false;
  std::unique_ptr<EvictionPolicy> policy_;
  CachedFiles cachedFiles_;        // of the owned share, on disk
  std::set<std::string> writing_;  // chunks admitted and being written to disk
  int64_t ownedEmptyFiles_ = 0;    // cached with no chunk
  bool shareCounted_ = false;      // progress_'s owned files and bytes are known
  WarmProgress progress_;
  ReadTotals reads_;
  int64_t reportedRetries_ = 0;  // of the origins' retries, what the metric has counted
  RateMeter fetchRate_;          // countFetched(): the warm rate
  // The warm pass in progress.
  WarmQueue queue_;
  WarmPriorities::Turn* turn_ = nullptr;  // the pass's place among the node's datasets
  std::string hintNote_;                  // what the status says of the access-order hint
  std::set<std::string> changedFiles_;    // found changed at the origin since this pass began
  std::map<std::string, uint64_t> pinnedContent_;  // hashes of files read whole, by path
  int64_t failedChunks_ = 0;
  std::string lastError_;
  bool capacityReached_ = false;
  bool diskFull_ = false;

  std::jthread thread_;  // last: stops first
};

std::string_view phaseName(Phase phase);
// Whether warming has nothing left to do in `phase` until something changes (a plan, the node
// set, room on disk): every phase but kPending, kListing and kWarming.
bool phaseSettled(Phase phase);
// Whether `phase` is what the dataset's policy and quota allow when nothing failed: kReady,
// kOnDemand or kQuotaFull.
bool phaseAsConfigured(Phase phase);

}  // namespace granary::cache
