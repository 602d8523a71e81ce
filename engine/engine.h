// The cache node's engine: its stores, opened and reconciled at start-up, and the datasets it
// holds. The gRPC service, the CSI plugin and the standalone mode are adapters over it.
//
// Datasets are held in memory; what survives a restart is on disk (manifests, verified chunks).
// After a restart the operator (or the standalone manifest) ensures them again, and they pick up
// where they were: no listing again, no verified chunk fetched again.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "engine/core/bandwidth_limiter.h"
#include "engine/core/manifest_changes.h"
#include "engine/dataset_cache.h"
#include "engine/origin/make_origin.h"
#include "engine/store/chunk_store.h"
#include "engine/store/manifest_store.h"

namespace granary::cache {

struct EngineOptions {
  std::string nodeName;
  // Manifests and the chunk index (RocksDB), on the node's disk.
  std::filesystem::path stateDirectory;
  // Where chunks go, with a quota each (several NVMe drives).
  std::vector<CacheDirectory> cacheDirectories;
  // For datasets that do not set them.
  int64_t defaultChunkSize = 16 << 20;
  int warmConcurrency = 8;
  // Listing requests per dataset side by side, where the origin lists parts of its key order.
  int listingConcurrency = 8;
  // Origin reads of the whole node, bytes per second; 0 unlimited.
  int64_t bandwidthLimit = 0;
  // Verify every chunk's checksum at start-up (slower start, catches bit rot). Sizes are
  // always checked, and so are the checksums of chunks written after the last flush.
  bool verifyChecksumsAtStart = false;
  OriginSettings origins;
  // Memory for whole chunks of other nodes' shares, held after a read fetched them for the reads
  // of the same chunk that follow (HeldChunks); 0 holds none, and each read fetches again.
  int64_t heldChunkBytes = int64_t{256} << 20;
};

// A mount of a dataset: its sub-directory ("" the root) and where its data comes from.
struct MountSpec {
  std::string name;
  SourceSpec source;
};

struct EnsureSpec {
  DatasetKey key;
  std::vector<MountSpec> mounts;
  // capacityBytes 0: the node's whole quota; chunkSize 0: the node's default;
  // warmConcurrency 0: the node's.
  DatasetSettings settings;
};

// A view: the newest generation of another dataset on this node (`source`, namespace and name),
// or one directory of it, under a second name. It holds no bytes and no settings of its own.
struct ViewSpec {
  DatasetKey key;
  DatasetKey source;
  std::string path;  // "" for the whole dataset
};

// What a dataset's name serves: the dataset itself at path "", or a view's source and directory.
struct Resolved {
  std::shared_ptr<DatasetCache> cache;
  std::string path;

  // `relative` of the view as a path of the served dataset.
  std::string pathOf(const std::string& relative) const {
    return path.empty() ? relative : relative.empty() ? path : path + "/" + relative;
  }
  // A path of the served dataset, under `path`, as a path of the view.
  std::string relativePath(const std::string& served) const {
    return path.empty() ? served : served == path ? "" : served.substr(path.size() + 1);
  }
};

class CacheEngine final : public SameSourceChunks {
 public:
  // Opens the stores and reconciles the chunk index with the disks. InvalidArgument for a
  // missing node name or cache directory; Unavailable when a store cannot be opened.
  static Result<std::unique_ptr<CacheEngine>> open(EngineOptions options, Clock& clock,
                                                   PeerReader* peers, CacheMetrics* metrics);
  ~CacheEngine();

  // Creates the dataset generation (building its origins) or updates its node set and warm
  // settings. Errors name the field at fault (mounts[i].source.uri, cache.replicas, ...).
  Result<std::shared_ptr<DatasetCache>> ensure(EnsureSpec spec);
  // Calls `listener` with each dataset generation ensure() creates from now on, on the ensuring
  // thread; an empty function ends the calls (and waits for one in progress). One at a time.
  void onCreated(std::function<void(const std::shared_ptr<DatasetCache>&)> listener);
  // Records a view (replacing the view of that name). InvalidArgument for a bad name or path;
  // NotFound while this node does not hold the source; FailedPrecondition when a dataset of
  // this node has the view's name.
  Status ensureView(ViewSpec spec);
  // The dataset `key` names (as find()), or the view's source and directory. `version`, when not
  // 0, is the generation of the dataset served (a view's source) to resolve to. NotFound when
  // neither is here, or a view's source (or that version) is not.
  Result<Resolved> resolve(const DatasetKey& key, int64_t version = 0) const;
  // Lists the origins of `current` (generation 0: the newest held) again, as generation `next`,
  // from the start, and compares the two file by file. With a change, `next` is marked listed
  // whole, for an ensure() of it to serve without listing (a new version: unchanged files are
  // linked from `current`'s chunks, not fetched); without one, it is dropped. A refresh cut short
  // (`stop`, an origin that failed, the process killed) before that leaves `current` as it is and
  // `next` never listed whole, so nothing of it is served; a later refresh to the same `next`
  // drops what it stored and lists again.
  // InvalidArgument when `next` is not above `current`'s generation, FailedPrecondition when
  // `next` is held already or `current` is not listed whole yet.
  Result<ManifestChanges> refresh(const DatasetKey& current, int64_t next, std::stop_token stop,
                                  const std::function<void(const ManifestTotals&)>& counted = {});
  // The generations of `key`'s dataset (namespace, name and uid) listed whole on this node, held
  // or not, in ascending order.
  Result<std::vector<int64_t>> listedVersions(const DatasetKey& key) const;
  // Purges one generation, or every generation of namespace/name. Returns the bytes freed;
  // NotFound when nothing matched. Purging a view frees nothing: its source keeps its bytes.
  Result<int64_t> purge(const DatasetKey& key, bool allGenerations);
  // The generation named by `key`; generation 0 finds the newest one of namespace/name.
  Result<std::shared_ptr<DatasetCache>> find(const DatasetKey& key) const;
  std::vector<std::shared_ptr<DatasetCache>> datasets() const;

  // Datasets with the same sources and chunk size share the chunks of the objects both listed
  // at the same version: a chunk one holds is linked into the other's name.
  std::optional<ChunkId> holderOf(const DatasetKey& asking, const ManifestEntry& file,
                                  int64_t index) override;

  const std::string& nodeName() const { return options_.nodeName; }
  const ReconcileReport& startupReport() const { return startup_; }
  std::vector<DirectoryUsage> usage() const { return chunks_->usage(); }

 private:
  CacheEngine(EngineOptions options, Clock& clock);
  Result<std::shared_ptr<DatasetCache>> createOrUpdate(EnsureSpec spec, bool& created);
  Result<std::shared_ptr<DatasetCache>> findLocked(const DatasetKey& key) const
      GRANARY_REQUIRES(mutex_);

  EngineOptions options_;
  std::unique_ptr<ManifestStore> manifests_;
  std::unique_ptr<ChunkStore> chunks_;
  BandwidthLimiter bandwidth_;
  WarmPriorities priorities_;  // which dataset's warm fetches go first
  HeldChunks<FetchedChunk> held_;
  // Fetched chunks' buffers waiting to be used again, at most these bytes.
  static constexpr size_t kChunkBuffersBytes = size_t{64} << 20;
  ChunkBuffers buffers_{kChunkBuffersBytes};
  std::unique_ptr<NodeContext> context_;
  ReconcileReport startup_;
  mutable Mutex mutex_;
  std::map<std::string, std::shared_ptr<DatasetCache>> datasets_
      GRANARY_GUARDED_BY(mutex_);                                     // by DatasetKey::id()
  std::map<std::string, ViewSpec> views_ GRANARY_GUARDED_BY(mutex_);  // by DatasetKey::label()
  // What each dataset's chunks are made from (its sources and chunk size), by DatasetKey::id().
  std::map<std::string, std::string> sourcesOf_ GRANARY_GUARDED_BY(mutex_);
  Mutex listenerMutex_;  // held while onCreated_ runs
  std::function<void(const std::shared_ptr<DatasetCache>&)> onCreated_
      GRANARY_GUARDED_BY(listenerMutex_);
};

}  // namespace granary::cache
