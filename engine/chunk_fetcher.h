// Where a chunk that is not on this node's disk comes from, for one dataset generation: the disk
// again (a fetch that finished meanwhile), then its owners among the peers (the first one asked
// to fill it from the origin, so that the origin is read once per dataset), then the origin,
// under the dataset's and the node's bandwidth limits. Concurrent fetches of one chunk share one
// flight. A file whose origin pins it by its size only (isSizeVersion) is read whole from the
// origin, never from peers, so that no file is assembled from two of its versions, and its
// content is pinned: a later whole read that differs is a change. What is fetched for this node's
// share goes to the dataset's ChunkKeeper to be kept.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "engine/cache_metrics.h"
#include "engine/core/bandwidth_limiter.h"
#include "engine/core/chunk_buffers.h"
#include "engine/core/held_chunks.h"
#include "engine/core/single_flight.h"
#include "engine/origin/origin.h"
#include "engine/store/chunk_store.h"
#include "engine/store/manifest_store.h"

namespace granary::cache {

class WarmPriorities;

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

// Where chunks this node does not hold come from: the other cache nodes (the gRPC adapter).
class PeerReader {
 public:
  virtual ~PeerReader() = default;
  // Chunk `index` of `path`, whole (`length` bytes) and verified, from `node`. With `fill`, that
  // node fetches it from the origin when it has not cached it. FailedPrecondition when the
  // versions differ; NotFound when `node` neither holds nor fills it; Corruption when what
  // arrived failed its checksums; Unavailable when the node cannot be reached or stops sending;
  // Cancelled once `stop` is requested. The chunk arrives in `buffer` where it can (its bytes are
  // overwritten, its memory used again: ChunkBuffers).
  virtual Result<std::string> readChunk(const std::string& node, const DatasetKey& dataset,
                                        const std::string& path, int64_t index,
                                        const std::string& etag, bool fill, int64_t length,
                                        std::stop_token stop, std::string buffer) = 0;
  // Follows `node`'s listing of `dataset` (ListingFeed), or of its `share` of it (the origin keys
  // in those ranges; none: the whole listing): `each` gets the files listed there in batches,
  // those already listed first, then the rest as they are listed (a file may come twice; an
  // empty batch says the listing goes on); returns the totals of the listing or share once it
  // is complete. NotFound when `node` does not hold the dataset; FailedPrecondition while it
  // neither lists it (or that share) nor has listed it. Stops at the first error `each` returns,
  // and with Cancelled once `stop` is requested.
  virtual Result<ManifestTotals> followListing(
      const std::string& node, const DatasetKey& dataset, std::span<const KeyRange> share,
      std::stop_token stop, const std::function<Status(std::span<const ManifestEntry>)>& each) = 0;
};

// Chunks that another dataset of this node holds for the same object at the same version: a
// dataset with the same sources and chunk size whose listing found the file with the same ETag
// and size (each listed with its own credentials). The engine answers.
class SameSourceChunks {
 public:
  virtual ~SameSourceChunks() = default;
  // A chunk of another dataset holding chunk `index` of `file` as dataset `asking` lists it;
  // nullopt when none does.
  virtual std::optional<ChunkId> holderOf(const DatasetKey& asking, const ManifestEntry& file,
                                          int64_t index) = 0;
};

enum class Source { kLocal, kPeer, kOrigin };

// A piece of a file read from within one chunk.
struct Piece {
  std::string data;
  Source source = Source::kLocal;
};

// A whole chunk as a fetch brought it: shared by every reader that waited on that fetch (and held
// for the reads after it), never copied for one.
struct FetchedChunk {
  std::shared_ptr<const std::string> bytes;
  Source source = Source::kLocal;
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
  // Chunks other datasets hold of the same objects; null: none is shared.
  SameSourceChunks* sameSource = nullptr;
  // Listing requests a dataset sends its origin side by side, where the origin can list parts of
  // its key order (S3).
  int listingConcurrency = 8;
  // Chunks fetched for reads that this node does not keep on disk; null: none is held (each read
  // fetches its chunk again).
  HeldChunks<FetchedChunk>* held = nullptr;
  // Buffers of fetched chunks, used again; null: each fetch allocates its own.
  ChunkBuffers* buffers = nullptr;
};

enum class FetchKind {
  kDemand,  // a reader waits: its origin reads retry what passes, and it goes first under a limit
  kWarm,    // the warmer, or a peer's fill
};

// What the fetcher needs of the dataset it fetches for (DatasetCache). Called with none of the
// fetcher's locks held.
class ChunkKeeper {
 public:
  virtual ~ChunkKeeper() = default;
  // The nodes holding `path`, its first owner first.
  virtual std::vector<std::string> ownersOf(const std::string& path) = 0;
  // Keeps a fetched chunk of a file of `fileChunks` chunks, as the eviction policy allows:
  // ResourceExhausted when the quota or the disk refuse it.
  virtual Status keep(const ChunkId& id, const std::string& data, int64_t fileChunks) = 0;
  // Keeps chunk `to` as a second name of `from`, another dataset's chunk of the same object at
  // the same version (one copy on disk), as the eviction policy allows: ResourceExhausted when
  // the quota refuses it; another error when the link fails.
  virtual Status keepShared(const ChunkId& from, const ChunkId& to, int64_t size,
                            int64_t fileChunks) = 0;
  // A local read of a chunk failed with `local`: whether the chunk was damaged (then dropped and
  // forgotten, so that it is fetched again).
  virtual bool forgetIfDamaged(const std::string& path, int64_t index, const Status& local) = 0;
  // `bytes` of this node's share came from a peer or the origin (the warm rate).
  virtual void countFetched(int64_t bytes) = 0;
  // `path` changed at the origin since it was listed.
  virtual void changedAtOrigin(const std::string& path) = 0;
  // A reader's origin read failed for a moment and is tried again.
  virtual void countReaderRetry() = 0;
};

class ChunkFetcher {
 public:
  struct Settings {
    int64_t chunkSize = 16 << 20;
    int64_t bandwidthLimit = 0;  // this dataset's origin reads, bytes per second; 0 unlimited
    // How long a reader's origin read retries what fails for a moment (Unavailable).
    std::chrono::milliseconds readRetryTime{30'000};
  };

  // `keeper` and `metrics` (null: not exported) outlive the fetcher.
  ChunkFetcher(NodeContext& node, DatasetKey key, std::vector<DatasetSource> sources,
               Settings settings, ChunkKeeper& keeper, DatasetMetrics* metrics);

  // Chunk `index` of `file`, whole: from the disk, from the chunks held after an earlier fetch, or
  // fetched (a chunk this node does not keep is then held). FailedPrecondition when the file
  // changed at the origin (peers and the keeper are told); InvalidArgument for a file pinned by
  // size only that is too large to read whole; otherwise what the last source said. A demand
  // fetch's origin reads are retried within readRetryTime, or until `stop`.
  Result<FetchedChunk> fetch(const ManifestEntry& file, int64_t index, FetchKind kind,
                             std::stop_token stop);
  // Chunk `index` of `file` when it is held in memory after an earlier fetch.
  std::optional<FetchedChunk> held(const ManifestEntry& file, int64_t index) {
    if (node_.held == nullptr) return std::nullopt;
    return node_.held->find(heldKey(file, index));
  }
  // Waits until no demand fetch is in flight; false when `stop` ended the wait.
  bool waitForNoDemand(std::stop_token stop);

  // Whether the dataset or the node has a bandwidth limit (tokens are scarce).
  bool bandwidthLimited() const;
  void setBandwidthLimit(int64_t bytesPerSecond) { bandwidth_.setRate(bytesPerSecond); }
  void setReadRetryTime(std::chrono::milliseconds time);
  // Told when a warm fetch starts (true) and ends (false) a wait for the dataset's own bandwidth
  // limit, from the fetching thread, without the fetcher's lock. Empty: no one is told.
  void setOwnLimitWaitObserver(std::function<void(bool waiting)> observer);
  // The dataset's sources, for its listing.
  const std::vector<DatasetSource>& sources() const { return sources_; }
  // Requests the origins retried after transient failures, all sources together.
  int64_t originRetries() const;
  int64_t chunkLength(const ManifestEntry& file, int64_t index) const;
  // Files of this generation the origin no longer has as it was listed (removed, or changed
  // since): a read of them that the cache cannot serve fails. The first kGoneKept found.
  static constexpr size_t kGoneKept = 10;
  std::vector<std::string> goneFromOrigin() const;

 private:
  Result<FetchedChunk> fetchUncached(const ManifestEntry& file, int64_t index, FetchKind kind,
                                     std::stop_token stop);
  // The chunk from another dataset of this node with the same object at the same version:
  // kept as a second name of its file when this node owns the chunk, else read from it.
  std::optional<FetchedChunk> fromSameSource(const ManifestEntry& file, int64_t index,
                                             FetchKind kind, bool selfOwns);
  // Chunk `index` of a file pinned only by its size, from one origin read of the whole file
  // shared by every chunk asked for meanwhile.
  Result<FetchedChunk> fetchFromWholeFile(const ManifestEntry& file, int64_t index, FetchKind kind,
                                          std::stop_token stop);
  Result<std::shared_ptr<const std::string>> fetchWholeFile(const ManifestEntry& file,
                                                            FetchKind kind, std::stop_token stop);
  // FailedPrecondition when `whole` differs from what this node read of the file before: a
  // chunk on disk, or the content the first whole read pinned.
  Status pinContent(const ManifestEntry& file, const std::string& whole);
  // Keeps the chunks of `whole` this node does not hold yet (the caller owns the file).
  void keepWhole(const ManifestEntry& file, const std::string& whole, FetchKind kind);
  // Counts `bytes` kept by a warm fetch in granary_cache_warm_bytes_total.
  void countWarmed(FetchKind kind, int64_t bytes);
  Result<std::string> readOrigin(FetchKind kind, const ManifestEntry& file, int64_t offset,
                                 int64_t length);
  // Records `path` in goneFromOrigin() (logged once) when the origin's `error` says it no longer
  // has the file as listed: NotFound, or FailedPrecondition (another version of it).
  void noteIfGone(const std::string& path, const Status& error) GRANARY_EXCLUDES(mutex_);
  // Waits until the dataset's own limit lets `length` bytes pass (the observer told of a warm
  // fetch's wait).
  void awaitOwnLimit(FetchKind kind, int64_t length);
  // readOrigin for a reader, retried with backoff within readRetryTime.
  Result<std::string> readOriginForReader(const ManifestEntry& file, int64_t offset, int64_t length,
                                          std::stop_token stop);
  Result<std::string> readOriginAs(FetchKind kind, const ManifestEntry& file, int64_t offset,
                                   int64_t length, std::stop_token stop);
  ChunkId chunkId(const std::string& path, int64_t index) const;
  // `bytes` shared by the chunk's readers (and given back to the node's buffers after them).
  std::shared_ptr<const std::string> share(std::string bytes) const;
  // A chunk's name among the held ones: its id and the version of the file it was fetched at.
  std::string heldKey(const ManifestEntry& file, int64_t index) const;

  NodeContext& node_;
  const DatasetKey key_;
  const std::string id_;
  const std::vector<DatasetSource> sources_;
  const int64_t chunkSize_;
  ChunkKeeper& keeper_;
  DatasetMetrics* const metrics_;
  BandwidthLimiter bandwidth_;  // the dataset's own limit, within the node's
  SingleFlight<FetchedChunk> flights_;
  SingleFlight<std::shared_ptr<const std::string>> wholeFiles_;  // by path

  mutable Mutex mutex_;
  std::condition_variable_any demandDone_;  // waits on mutex_: a demand fetch ended
  int demandInFlight_ GRANARY_GUARDED_BY(mutex_) = 0;
  std::chrono::milliseconds readRetryTime_ GRANARY_GUARDED_BY(mutex_);
  std::map<std::string, uint64_t> pinnedContent_ GRANARY_GUARDED_BY(mutex_);  // by path
  std::function<void(bool)> ownLimitWaitObserver_ GRANARY_GUARDED_BY(mutex_);
  std::vector<std::string> gone_ GRANARY_GUARDED_BY(mutex_);  // goneFromOrigin()
};

}  // namespace granary::cache
