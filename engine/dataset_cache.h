// One dataset generation on this node: its manifest, its share of the chunks, and the warmer
// that fills that share. Every read is served local → peer → origin, and concurrent misses on
// one chunk share one fetch.
//
// Lifecycle: create() starts a background thread that lists the origins into the manifest
// (once per generation: a completed listing survives restarts), then hands over to the dataset's
// Warmer (engine/warmer.h), which warms the chunks this node owns under rendezvous placement, as
// the warm mode and plan allow, and keeps the phase. Chunks already on disk (verified at start-up
// by the chunk store) are counted, not fetched again. The origin's index is read once per set:
// an S3 origin is listed in shares, each node of the set listing a share and following the
// others' (engine/dataset_shares.cc); otherwise one node of the set lists the origins (the
// highest rendezvous weight for the dataset) and the others follow its listing as it goes
// (PeerReader::followListing). A node lists what it cannot follow itself.
//
// A read that misses while warming puts the rest of its file first in the warm order. Demand
// reads never wait for warming; under a bandwidth limit they also go first (warm fetches wait
// while a demand fetch is in flight), and without one warming runs on beside them. A chunk this
// node does not own is asked of its first owner with `fill` (the owner fetches it from the origin
// if it must), so the origin is read once per dataset; other owners and then the origin are the
// fallbacks. A file whose origin pins it only by its size (isSizeVersion) is read whole from the
// origin, never from peers, so that no file is assembled from two of its versions.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/thread_annotations.h"
#include "engine/cache_metrics.h"
#include "engine/chunk_fetcher.h"
#include "engine/core/cached_files.h"
#include "engine/core/dataset_phase.h"
#include "engine/core/eviction.h"
#include "engine/core/rate_meter.h"
#include "engine/core/read_ahead.h"
#include "engine/dataset_settings.h"
#include "engine/listing_feed.h"
#include "engine/origin/origin.h"
#include "engine/source_listing.h"
#include "engine/store/chunk_store.h"
#include "engine/store/manifest_store.h"
#include "engine/warmer.h"

namespace granary::cache {

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
  std::vector<std::string> goneFromOrigin;  // ChunkFetcher::goneFromOrigin
};

// The same read into a caller's buffer: how many bytes, and from where.
struct PieceRead {
  int64_t size = 0;
  Source source = Source::kLocal;
};

// The same read of a chunk in memory, where it lies: `size` bytes from `within` of the chunk,
// which the piece keeps alive.
struct ChunkPiece {
  FetchedChunk chunk;
  int64_t within = 0, size = 0;
  const char* data() const { return chunk.bytes->data() + within; }
};

// A chunk as this node sends it to a peer: its file (from offset 0, `size` bytes) with the
// checksums the store recorded as it wrote it; or, for a chunk fetched for the peer but not kept
// here, its bytes with checksums computed from them.
struct PeerChunk {
  OwnedFd file;
  std::shared_ptr<const std::string> bytes;  // when `file` is not open
  int64_t size = 0;
  std::vector<uint32_t> checksums;  // ChunkStore::blockChecksum of each kChecksumBlock bytes
};

class DatasetCache final : private ChunkKeeper, private WarmHost {
 public:
  // The longest wait between tries of a listing the origin failed (kPending meanwhile, with
  // what is awaited). A listing that InvalidArgument ended is not tried again (kFailed).
  static constexpr std::chrono::seconds kListRetryMax{60};
  // Chunks read ahead at once (readMissing), each a thread while it runs.
  static constexpr int kReadAheads = 8;
  // How long a node waits for the node that lists the dataset (the first of its set by
  // rendezvous weight) to hold it and be listing it, before it lists the origins itself.
  static constexpr std::chrono::seconds kListerWait{30};
  // How long a peer's read waits for this node's listing to reach a path the peer listed or took
  // before it (a follower trails its lister): then Unavailable, and the peer reads elsewhere.
  static constexpr std::chrono::seconds kPeerPathWait{2};

  // InvalidArgument for no sources, an empty node set without this node, replicas < 1 or a
  // chunk size < 4 KiB. Starts listing (and warming) in the background: a listing the origin
  // failed is tried again with backoff, up to kListRetryMax apart, until it succeeds.
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

  // An entry the listing has found is served at once, while the listing goes on; one not found
  // yet waits for the listing to end: NotFound only for what the whole listing did not find.
  Result<ManifestEntry> stat(const std::string& path) override;
  Result<ManifestEntry> statInode(uint64_t inode);
  // Waits for the listing: a directory is listed whole (the kernel keeps what readdir returns).
  Result<std::vector<ManifestEntry>> list(const std::string& directory, const std::string& after,
                                          size_t limit);
  // Reads from `offset` of a file to the end of the chunk holding it, at most `maxLength`
  // bytes; empty at or past the end of the file.
  Result<Piece> readPiece(const std::string& path, int64_t offset, int64_t maxLength);
  // The same for a file already looked up (`file` must come from this dataset's manifest).
  Result<Piece> readPiece(const ManifestEntry& file, int64_t offset, int64_t maxLength);
  // The same into the start of `buffer` (room for `maxLength` bytes), past this node's page
  // cache (ChunkStore::readInto): for a reader with a page cache of its own. Without `fetch`,
  // NotFound instead of fetching a chunk this node does not hold on disk.
  Result<PieceRead> readPieceInto(const ManifestEntry& file, int64_t offset, int64_t maxLength,
                                  std::span<char> buffer, bool fetch = true);
  // The same from a chunk in memory, not copied: one held since an earlier fetch (another node
  // keeps it), else, with `fetch`, fetched now. NotFound without `fetch` when none is held. For a
  // reader that takes the bytes where they lie (a FUSE reply) after the disk had none.
  Result<ChunkPiece> readPieceInMemory(const ManifestEntry& file, int64_t offset, int64_t maxLength,
                                       bool fetch);
  // The cached file holding all of `file`'s bytes, open and verified (ChunkStore::openVerified),
  // for a reader the kernel serves from it directly. FailedPrecondition for a file that is not one
  // whole chunk (a directory, an empty file, or one larger than a chunk): it never has such a file.
  // NotFound while its chunk is not on this node; Corruption when it was damaged (dropped, to be
  // fetched again).
  Result<OwnedFd> openCached(const ManifestEntry& file);
  // Whether all of `file`'s bytes lie in one chunk: a file (not a directory) of 1 byte up to the
  // chunk size.
  bool heldInOneChunk(const ManifestEntry& file) const;
  // A reader opened `file` to be served from its chunk's file by the kernel: counted as a read of
  // the whole file from this node's disks (a hit for the eviction policy).
  void countPassedThrough(const ManifestEntry& file);
  // Reads `length` bytes (-1: to the end) from `offset`, chunk by chunk.
  Result<std::string> read(const std::string& path, int64_t offset, int64_t length) override;
  // For a peer: chunk `index` of `path`, whole and verified. With `fill`, fetched (and kept)
  // when this node owns the file; NotFound otherwise. FailedPrecondition when `etag` is not the
  // listed version.
  Result<std::shared_ptr<const std::string>> readChunkForPeer(const std::string& path,
                                                              int64_t index,
                                                              const std::string& etag, bool fill);
  // The same as a file to send with its recorded checksums (the peer checks every byte against
  // them), or bytes in memory where a fill could not be kept.
  Result<PeerChunk> openChunkForPeer(const std::string& path, int64_t index,
                                     const std::string& etag, bool fill);
  bool hasChunk(const std::string& path, int64_t index) const;
  // For a peer that follows this node's listing, or its `share` of it (PeerReader::followListing;
  // none: the whole listing): `send` gets the files listed so far, then the rest as they are
  // listed (an empty batch while none came for a second); returns the totals once the listing or
  // share is complete. A share is served while this node lists it, and any share once the whole
  // listing is complete here. FailedPrecondition while this node neither lists that (the whole
  // listing, or the share) nor has listed it; Conflict while it lists another share (its split
  // differs); Unavailable when its listing started over or its share ended early while `send`
  // was sent it. Stops at the first error `send` returns.
  Result<ManifestTotals> shareListing(
      std::span<const KeyRange> share,
      const std::function<Status(std::span<const ManifestEntry>)>& send);

  DatasetState state();
  // Waits until warming has nothing left to do (Ready, Degraded or Failed) or `timeout`
  // passes; returns the state then.
  DatasetState waitSettled(std::chrono::milliseconds timeout);

  // Lists the origins again into the manifest of generation `id` (another version of this
  // dataset), from the start (whatever an earlier listing of `id` stored is dropped), and returns
  // its totals without marking it complete: the caller decides whether it becomes a version.
  // `counted` gets the totals stored so far after each batch. FailedPrecondition while this
  // generation is not listed whole yet.
  Result<ManifestTotals> listVersion(const std::string& id, std::stop_token stop,
                                     const std::function<void(const ManifestTotals&)>& counted);
  // The node of the set that lists generation `generation` of this dataset (this one, or a
  // version a refresh makes): the highest rendezvous weight for that generation.
  std::string listerOf(int64_t generation) const GRANARY_EXCLUDES(mutex_);

  // Stops warming and removes the generation's chunks and manifest; returns the bytes freed.
  Result<int64_t> purge();

 private:
  DatasetCache(NodeContext& node, DatasetKey key, std::vector<DatasetSource> sources,
               DatasetSettings settings);
  // Ends the listing and the warmer; readers waiting for the listing return.
  void stopWarming() GRANARY_EXCLUDES(mutex_);
  Status waitListed() GRANARY_EXCLUDES(mutex_);  // Unavailable when listing failed or stopping
  // stat() for a peer's read: waits kPeerPathWait at most for a path not listed here yet, not
  // for the whole listing.
  Result<ManifestEntry> statForPeer(const std::string& path) GRANARY_EXCLUDES(mutex_);
  bool listed() const GRANARY_EXCLUDES(mutex_);

  // ---- listing (the background thread; engine/dataset_listing.cc) ----
  void run(std::stop_token stop) GRANARY_EXCLUDES(mutex_);
  // One try at the manifest: kept from a completed listing, else listed in shares with the set
  // (listInShares), else taken from the node that lists the dataset (listerOf), else listed from
  // the origins, going on from a listing of them cut short where its source lists in key order.
  // What is stored is fed to followers.
  Status listOnce(std::stop_token stop) GRANARY_EXCLUDES(mutex_);
  // Where listing the origins starts: the progress stored, where its source can go on from it;
  // else the start, with what a listing cut short stored dropped.
  Result<ListingProgress> listingStart(const std::string& id) GRANARY_EXCLUDES(mutex_);
  // This generation's listing of the origins, from `from`, its batches fed to followers.
  Status listFromOrigins(std::stop_token stop, ListingProgress from) GRANARY_EXCLUDES(mutex_);
  // The origins listed into the manifest of generation `id` from `from`; the totals listed (not
  // marked complete).
  Result<ManifestTotals> listOrigins(const std::string& id, ListingProgress from,
                                     std::stop_token stop,
                                     const std::function<void(const ManifestTotals&)>& counted,
                                     const SourceListing::Stored& stored) GRANARY_EXCLUDES(mutex_);
  // How long a follower waits for a lister before it gives up: for it to hold the dataset (it
  // may have just been told of it), and with `listing` for it to be listing it too (it may be
  // between tries of an origin that failed).
  struct FollowWait {
    std::chrono::seconds most = kListerWait;
    bool listing = true;
  };
  // Takes the listing whole from `lister` (follow), its batches fed to followers, and marks it
  // complete.
  Status followLister(const std::string& lister, FollowWait wait, std::stop_token stop)
      GRANARY_EXCLUDES(mutex_);
  // Follows `lister`'s listing, or its `share` of it (none: the whole; what is sent beyond the
  // share is not taken), into the manifest, `took` called after each batch is stored; the totals
  // `lister` sends at the end.
  Result<ManifestTotals> follow(const std::string& lister, std::span<const KeyRange> share,
                                FollowWait wait, std::stop_token stop,
                                const std::function<void(std::span<const ManifestEntry>)>& took)
      GRANARY_EXCLUDES(mutex_);

  // ---- a listing split among the nodes of the set (engine/dataset_shares.cc) ----
  // The nodes that list this generation's origins between them, in the order of their shares:
  // the node set by rendezvous weight, where it has more than one node, peers can be followed and
  // the dataset has one source, listed in key order. Empty: one node lists it whole.
  std::vector<std::string> shareListers() const GRANARY_EXCLUDES(mutex_);
  // The listing with the set: the origin's parts dealt out among `listers` (shareParts), this
  // node listing its share and following every other one, or listing it itself where its lister
  // cannot be followed. A version that the first lister holds whole already (a refresh made it,
  // or this node joined the set late) is taken whole from it instead.
  Status listInShares(const std::vector<std::string>& listers, std::stop_token stop)
      GRANARY_EXCLUDES(mutex_);
  // Every share at once (`shares[i]` listed by `listers[i]`): this node's (`mine`) listed and
  // fed to followers, the others followed or listed here (takeShare); the first that fails ends
  // the others. The listing's totals, the sum of the shares'.
  Result<ManifestTotals> takeShares(const std::vector<std::string>& listers,
                                    const std::vector<std::vector<KeyRange>>& shares, size_t mine,
                                    std::stop_token stop) GRANARY_EXCLUDES(mutex_);
  // One share into the manifest, `took` called after each batch is stored; its totals. This
  // node's own (`own`) is listed (listOwnShare); another is followed from `lister`, or listed
  // here where it cannot be followed. A follow that breaks off part-way ends the try (what it
  // took stays in the manifest): the next try lists that lister's share here.
  Result<ManifestTotals> takeShare(const std::string& lister, const std::vector<KeyRange>& share,
                                   bool own, std::stop_token stop,
                                   const std::function<void(std::span<const ManifestEntry>)>& took)
      GRANARY_EXCLUDES(mutex_);
  // Lists this node's share once the other nodes of the set follow it (or 2 s passed: what is
  // stored before a follower comes, it reads back from the manifest), its batches fed to them;
  // then sets its totals and closes the feed.
  Result<ManifestTotals> listOwnShare(
      const std::vector<KeyRange>& share, std::stop_token stop,
      const std::function<void(std::span<const ManifestEntry>)>& took) GRANARY_EXCLUDES(mutex_);
  // Lists `share` of the origin into the manifest (without progress: a share is not resumed),
  // `took` called after each batch is stored; its totals.
  Result<ManifestTotals> listShare(const std::vector<KeyRange>& share, std::stop_token stop,
                                   const SourceListing::Stored& took) GRANARY_EXCLUDES(mutex_);
  // Whether `entry` is in `share`: its origin key (the path below the one source's mount) is.
  bool inShare(std::span<const KeyRange> share, const ManifestEntry& entry) const;
  // The node of the set that lists this generation's origins.
  std::string listerOf() const GRANARY_EXCLUDES(mutex_) { return listerOf(key_.generation); }
  void setTotals(const ManifestTotals& totals) GRANARY_EXCLUDES(mutex_);

  // ---- the warmer's share accounting ----
  // WarmHost: counts the files and bytes this node owns under the current node set into the
  // progress; the owned share against the quota (capacityReached left to the warmer).
  void countOwnedShare(std::stop_token stop) override GRANARY_EXCLUDES(mutex_);
  ShareFacts shareFacts() override GRANARY_EXCLUDES(mutex_);
  // This node's share of some files under a node set.
  struct OwnedCount {
    int64_t files = 0, bytes = 0, empty = 0;
    // Adds the files of `batch` that `node` owns among `nodes` with `replicas` copies.
    void add(std::span<const ManifestEntry> batch, std::string_view node,
             std::span<const std::string> nodes, int replicas);
    OwnedCount& operator+=(const OwnedCount& other);
  };
  // The share counted from the batches a listing stored, under the node set it began with, so
  // that the warmer need not read the whole manifest again once it ends. It stands for the
  // manifest where `files` is the listing's total: every file came once, in this process.
  struct ListedShare {
    std::vector<std::string> nodeSet;
    int replicas = 0;
    int64_t files = 0;
    OwnedCount owned;
  };
  // A listing (a try of it) begins, under the current node set.
  void beginListedShare() GRANARY_EXCLUDES(mutex_);
  // A listing stored `batch`.
  void countListed(std::span<const ManifestEntry> batch) GRANARY_EXCLUDES(mutex_);
  // The share read from the whole manifest; partial when `stop` comes first.
  OwnedCount scanOwnedShare(const std::vector<std::string>& nodes, int replicas,
                            std::stop_token stop) const;
  ShareFacts shareFactsLocked() const GRANARY_REQUIRES(mutex_);

  // ---- reads ----
  // Where a read of `file` from `offset` falls: chunk `index`, `within` it, `length` bytes
  // (0 at or past the end of the file). InvalidArgument for a negative offset or length,
  // FailedPrecondition for a directory.
  struct ChunkSpan {
    int64_t index = 0, within = 0, length = 0;
  };
  Result<ChunkSpan> spanOf(const ManifestEntry& file, int64_t offset, int64_t maxLength) const;
  void countHit(const ManifestEntry& file, int64_t index, int64_t bytes) GRANARY_EXCLUDES(mutex_);
  // The part of `chunk` that `span` names, copied to the start of `buffer`.
  static PieceRead copyPiece(const FetchedChunk& chunk, const ChunkSpan& span,
                             std::span<char> buffer);
  // A read the local store could not serve (`local`): fetched when the chunk is missing or was
  // damaged; other errors are returned.
  Result<FetchedChunk> readMissing(const ManifestEntry& file, const ChunkSpan& span,
                                   const Status& local);
  // Fetches chunk `next` of a file another node keeps (unless it is here or held), beside the
  // fetch of the chunk before it, so that it crosses the wire while the reader consumes that one.
  void readAhead(const ManifestEntry& file, int64_t next);
  Result<FetchedChunk> fetchChunk(const ManifestEntry& file, int64_t index, FetchKind kind);
  // The file a peer asks for, checked: listed in version `etag`, with a chunk `index`.
  Result<ManifestEntry> fileForPeer(const std::string& path, int64_t index,
                                    const std::string& etag);
  // Fetches chunk `index` of `file` for a peer (a fill), when this node owns it; else NotFound.
  Result<FetchedChunk> fillForPeer(const ManifestEntry& file, int64_t index, bool fill);
  void countRead(Source source, int64_t bytes, bool hit) GRANARY_EXCLUDES(mutex_);
  ChunkId chunkId(const std::string& path, int64_t index) const;
  int64_t chunkLength(const ManifestEntry& file, int64_t index) const;
  bool ownsLocked(const std::string& path) const GRANARY_REQUIRES(mutex_);

  // ---- what is kept (ChunkKeeper, for the fetcher) ----
  std::vector<std::string> ownersOf(const std::string& path) override GRANARY_EXCLUDES(mutex_);
  Status keep(const ChunkId& id, const std::string& data, int64_t fileChunks) override
      GRANARY_EXCLUDES(mutex_);
  Status keepShared(const ChunkId& from, const ChunkId& to, int64_t size,
                    int64_t fileChunks) override GRANARY_EXCLUDES(mutex_);
  // Admits `size` bytes of chunk `id` under the eviction policy, then `store`s it (retried after
  // the policy gives up chunks while the disk is full).
  Status keepWith(const ChunkId& id, int64_t size, int64_t fileChunks,
                  const std::function<Status()>& store) GRANARY_EXCLUDES(mutex_);
  bool forgetIfDamaged(const std::string& path, int64_t index, const Status& local) override
      GRANARY_EXCLUDES(mutex_);
  void countFetched(int64_t bytes) override GRANARY_EXCLUDES(mutex_);
  void changedAtOrigin(const std::string& path) override GRANARY_EXCLUDES(mutex_);
  void countReaderRetry() override GRANARY_EXCLUDES(mutex_);
  // Removes chunks the eviction policy gave up.
  void dropEvicted(const std::vector<std::string>& evicted) GRANARY_EXCLUDES(mutex_);
  void setListAwaited(bool awaited) GRANARY_EXCLUDES(mutex_);
  // Sets the progress's cached files and bytes from what is on disk.
  void refreshCachedLocked() GRANARY_REQUIRES(mutex_);

  NodeContext& node_;
  const DatasetKey key_;
  const std::string id_;
  const int64_t chunkSize_;  // fixed for a generation
  std::optional<DatasetMetrics> metrics_;
  ChunkFetcher fetcher_;  // local → peer → origin, for misses and the warmer

  mutable Mutex mutex_;
  std::condition_variable_any changed_;  // waits on mutex_: the listing ended, or stopping
  // The dataset's settings, and how its listing went.
  DatasetSettings settings_ GRANARY_GUARDED_BY(mutex_);
  bool listed_ GRANARY_GUARDED_BY(mutex_) = false;
  bool listFailed_ GRANARY_GUARDED_BY(mutex_) = false;
  // Between tries of a listing the origin failed: readers are answered Unavailable at once.
  bool listAwaited_ GRANARY_GUARDED_BY(mutex_) = false;
  bool stopping_ GRANARY_GUARDED_BY(mutex_) = false;
  // What is on disk, and its accounting.
  std::unique_ptr<EvictionPolicy> policy_ GRANARY_GUARDED_BY(mutex_);
  CachedFiles cachedFiles_ GRANARY_GUARDED_BY(mutex_);  // of the owned share, on disk
  // Chunks admitted and being written to disk, and their bytes: counted by the policy, not yet
  // cached (a node killed now has not got them).
  std::set<std::string> writing_ GRANARY_GUARDED_BY(mutex_);
  int64_t writingBytes_ GRANARY_GUARDED_BY(mutex_) = 0;
  int64_t ownedEmptyFiles_ GRANARY_GUARDED_BY(mutex_) = 0;  // cached with no chunk
  bool shareCounted_ GRANARY_GUARDED_BY(mutex_) = false;    // owned files and bytes are known
  ListedShare listedShare_ GRANARY_GUARDED_BY(mutex_);
  WarmProgress progress_ GRANARY_GUARDED_BY(mutex_);
  ReadTotals reads_ GRANARY_GUARDED_BY(mutex_);
  // Of the origins' retries, what the metric has counted.
  int64_t reportedRetries_ GRANARY_GUARDED_BY(mutex_) = 0;
  RateMeter fetchRate_ GRANARY_GUARDED_BY(mutex_);  // countFetched(): the warm rate

  // Whether this try lists in shares with the set, and this node's share then: the feed carries
  // that share alone, and its totals are set once it is listed, before the feed closes.
  int64_t listingTry_ GRANARY_GUARDED_BY(mutex_) = 0;  // bumped as each try begins
  bool listsInShares_ GRANARY_GUARDED_BY(mutex_) = false;
  std::vector<KeyRange> ownShare_ GRANARY_GUARDED_BY(mutex_);
  std::optional<ManifestTotals> ownShareTotals_ GRANARY_GUARDED_BY(mutex_);
  // Listers whose share this node lists itself: following it broke off part-way in a try.
  std::set<std::string> listsItself_ GRANARY_GUARDED_BY(mutex_);
  ListingFeed feed_;     // the listing (or this node's share of it), to peers that follow it
  Warmer warmer_;        // the warm passes and the phase; after what it calls
  std::jthread thread_;  // the listing; stopped first (stopWarming), its token cancels fetches
  // The next chunk of a file another node keeps, fetched as a reader waits on this one; last:
  // waits for those running (cancelled by thread_'s stop) while all they use is there.
  ReadAhead readAhead_{kReadAheads};
};

}  // namespace granary::cache
