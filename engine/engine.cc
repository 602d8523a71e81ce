#include "engine/engine.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <set>

#include "common/log.h"
#include "engine/manifest_comparison.h"
#include "engine/origin/beneath.h"

namespace granary::cache {
namespace {

// Both name directories of the node's mounts (<mountRoot>/<namespace>/<name>/<generation>).
Status checkName(const DatasetKey& key, const std::string& field) {
  if (key.ns.empty()) return invalidArgument(field + ".namespace: must be set");
  if (key.name.empty()) return invalidArgument(field + ".name: must be set");
  for (const auto& [part, value] :
       {std::pair{".namespace", &key.ns}, std::pair{".name", &key.name}}) {
    if (!isPlainRelativePath(*value) || value->find('/') != std::string::npos)
      return invalidArgument(field + part + ": \"" + *value +
                             "\" is not a name: no \"/\", \".\" or \"..\"");
  }
  return Status::ok();
}

// What a dataset's chunks are made from: its mounts' names, sources and credentials, and its
// chunk size. The credentials go in as a digest (this stays in memory, and is never logged):
// datasets share bytes only when they read them with the same credentials, so that one whose
// credentials may list an object but not read it is never handed its bytes.
std::string sourcesOf(const EnsureSpec& spec) {
  std::string text = std::to_string(spec.settings.chunkSize);
  for (const auto& mount : spec.mounts) {
    const SourceSpec& s = mount.source;
    const size_t credentials =
        std::hash<std::string>()(s.accessKeyId.reveal() + '\n' + s.secretAccessKey.reveal() + '\n' +
                                 s.sessionToken.reveal() + '\n' + s.bearerToken.reveal());
    text += '\n' + mount.name + '\t' + s.uri + '\t' + s.endpoint + '\t' + s.region + '\t' +
            std::to_string(credentials);
    for (const auto& [key, value] : s.options) text += '\t' + key + '=' + value;
  }
  return text;
}

}  // namespace

CacheEngine::CacheEngine(EngineOptions options, Clock& clock)
    : options_(std::move(options)),
      bandwidth_(clock, options_.bandwidthLimit),
      held_(options_.heldChunkBytes) {}

CacheEngine::~CacheEngine() {
  std::map<std::string, std::shared_ptr<DatasetCache>> doomed;
  {
    MutexLock lock(mutex_);
    doomed.swap(datasets_);
    sourcesOf_.clear();
  }
  // Stops every warmer before the stores close, unlocked: a fetch in flight may ask holderOf().
  doomed.clear();
}

Result<std::unique_ptr<CacheEngine>> CacheEngine::open(EngineOptions options, Clock& clock,
                                                       PeerReader* peers, CacheMetrics* metrics) {
  if (options.nodeName.empty()) return invalidArgument("nodeName: must be set");
  if (options.stateDirectory.empty()) return invalidArgument("stateDirectory: must be set");
  if (options.cacheDirectories.empty())
    return invalidArgument("cacheDirectories: name at least one directory with a quota");
  if (options.defaultChunkSize < 4096)
    return invalidArgument("chunkSize: must be at least 4096 bytes");
  std::unique_ptr<CacheEngine> engine(new CacheEngine(options, clock));
  GRANARY_ASSIGN_OR_RETURN(engine->manifests_,
                           ManifestStore::open(options.stateDirectory / "manifests"));
  GRANARY_ASSIGN_OR_RETURN(engine->chunks_, ChunkStore::open(options.stateDirectory / "chunk-index",
                                                             options.cacheDirectories));
  auto reconciled = engine->chunks_->reconcile(options.verifyChecksumsAtStart);
  if (reconciled.isOk()) {
    engine->startup_ = *reconciled;
  } else if (reconciled.status().code() == StatusCode::kResourceExhausted) {
    // A full disk: the node starts and serves what it holds (every read checks its bytes).
    Logger("cache").warn("chunk store not reconciled", {{"error", reconciled.status()}});
  } else {
    return reconciled.status();
  }
  engine->context_ = std::make_unique<NodeContext>(
      NodeContext{options.nodeName, *engine->manifests_, *engine->chunks_, engine->bandwidth_,
                  clock, peers, metrics, &engine->priorities_, engine.get(),
                  options.listingConcurrency, &engine->held_, &engine->buffers_});
  Logger("cache").info("chunk store reconciled",
                       {{"kept", engine->startup_.kept},
                        {"dropped_records", engine->startup_.droppedRecords},
                        {"removed_files", engine->startup_.removedFiles},
                        {"reread_unflushed", engine->startup_.verifiedUnflushed}});
  return engine;
}

Result<std::shared_ptr<DatasetCache>> CacheEngine::ensure(EnsureSpec spec) {
  bool created = false;
  GRANARY_ASSIGN_OR_RETURN(auto cache, createOrUpdate(std::move(spec), created));
  if (created) {
    MutexLock lock(listenerMutex_);
    if (onCreated_) onCreated_(cache);
  }
  return cache;
}

void CacheEngine::onCreated(std::function<void(const std::shared_ptr<DatasetCache>&)> listener) {
  MutexLock lock(listenerMutex_);
  onCreated_ = std::move(listener);
}

Result<std::shared_ptr<DatasetCache>> CacheEngine::createOrUpdate(EnsureSpec spec, bool& created) {
  const DatasetKey& key = spec.key;
  GRANARY_RETURN_IF_ERROR(checkName(key, "dataset"));
  if (key.generation < 1) return invalidArgument("dataset.generation: must be at least 1");
  if (spec.mounts.empty()) return invalidArgument("mounts: a dataset needs at least one source");
  DatasetSettings& settings = spec.settings;
  if (settings.capacityBytes == 0) {
    for (const auto& dir : options_.cacheDirectories) settings.capacityBytes += dir.quotaBytes;
  }
  if (settings.chunkSize == 0) settings.chunkSize = options_.defaultChunkSize;
  if (settings.warmConcurrency == 0) settings.warmConcurrency = options_.warmConcurrency;
  if (settings.nodeSet.empty()) settings.nodeSet = {options_.nodeName};

  MutexLock lock(mutex_);
  if (views_.contains(key.label()))
    return failedPrecondition("dataset " + key.label() +
                              " is a view of another dataset on this node; purge it first");
  if (auto it = datasets_.find(key.id()); it != datasets_.end()) {
    GRANARY_RETURN_IF_ERROR(it->second->update(settings));
    return it->second;
  }
  std::vector<DatasetSource> sources;
  std::set<std::string> names;
  for (size_t i = 0; i < spec.mounts.size(); ++i) {
    const auto& mount = spec.mounts[i];
    const std::string field = "mounts[" + std::to_string(i) + "]";
    if (!names.insert(mount.name).second)
      return invalidArgument(field + ".name: \"" + mount.name + "\" is used twice");
    if (!mount.name.empty()) {
      if (Status valid = validateManifestPath(mount.name); !valid.isOk())
        return invalidArgument(field + ".name: " + valid.message());
    }
    SourceSpec source = mount.source;
    source.ns = key.ns;  // a file:// uri only in this namespace's directories of its roots
    auto origin = makeOrigin(source, options_.origins);
    if (!origin.isOk())
      return Status(origin.status().code(), field + ".source." + origin.status().message());
    sources.push_back({mount.name, std::move(*origin)});
  }
  GRANARY_ASSIGN_OR_RETURN(auto cache,
                           DatasetCache::create(*context_, key, std::move(sources), settings));
  std::shared_ptr<DatasetCache> shared = std::move(cache);
  datasets_[key.id()] = shared;
  sourcesOf_[key.id()] = sourcesOf(spec);
  created = true;
  Logger("cache").info("dataset ensured",
                       {{"dataset", key.label()},
                        {"generation", key.generation},
                        {"nodes", static_cast<int64_t>(settings.nodeSet.size())}});
  return shared;
}

Status CacheEngine::ensureView(ViewSpec spec) {
  GRANARY_RETURN_IF_ERROR(checkName(spec.key, "dataset"));
  GRANARY_RETURN_IF_ERROR(checkName(spec.source, "view.source"));
  if (!spec.path.empty()) {
    if (Status valid = validateManifestPath(spec.path); !valid.isOk())
      return invalidArgument("view.path: " + valid.message());
  }
  MutexLock lock(mutex_);
  for (const auto& [_, cache] : datasets_) {
    if (cache->key().label() == spec.key.label())
      return failedPrecondition("dataset " + spec.key.label() +
                                " holds data on this node; it cannot become a view");
  }
  GRANARY_RETURN_IF_ERROR(findLocked({spec.source.ns, spec.source.name, 0, ""}).status());
  const auto [it, created] = views_.insert_or_assign(spec.key.label(), spec);
  if (created)
    Logger("cache").info(
        "view ensured",
        {{"dataset", spec.key.label()}, {"source", spec.source.label()}, {"path", spec.path}});
  return Status::ok();
}

Result<Resolved> CacheEngine::resolve(const DatasetKey& key, int64_t version) const {
  MutexLock lock(mutex_);
  const auto view = views_.find(key.label());
  if (view == views_.end()) {
    DatasetKey served = key;
    if (version != 0) served.generation = version;
    GRANARY_ASSIGN_OR_RETURN(auto cache, findLocked(served));
    return Resolved{std::move(cache), ""};
  }
  const ViewSpec& spec = view->second;
  auto source = findLocked({spec.source.ns, spec.source.name, version, ""});
  if (!source.isOk()) {
    return notFound("dataset " + key.label() + " is a view of " + spec.source.label() +
                    (version ? " version " + std::to_string(version) : "") +
                    ", which is not on this node");
  }
  return Resolved{std::move(*source), spec.path};
}

Result<ManifestChanges> CacheEngine::refresh(
    const DatasetKey& current, int64_t next, std::stop_token stop,
    const std::function<void(const ManifestTotals&)>& counted) {
  GRANARY_ASSIGN_OR_RETURN(const std::shared_ptr<DatasetCache> serving, find(current));
  DatasetKey version = serving->key();
  if (next <= version.generation) {
    return invalidArgument("refresh of " + version.label() + ": version " + std::to_string(next) +
                           " is not above the one served, " + std::to_string(version.generation));
  }
  version.generation = next;
  if (find(version).isOk()) {
    return failedPrecondition("refresh of " + version.label() + ": version " +
                              std::to_string(next) + " is held already");
  }
  const std::string id = version.id();
  // Nothing of an earlier `next` may stay: its chunks were read at other versions of its files.
  GRANARY_RETURN_IF_ERROR(chunks_->dropGeneration(id).status());
  GRANARY_ASSIGN_OR_RETURN(const ManifestTotals totals,
                           serving->listVersion(
                               id, stop, counted ? counted : [](const ManifestTotals&) {}));
  GRANARY_ASSIGN_OR_RETURN(const ManifestChanges changes,
                           compareVersions(*manifests_, serving->key().id(), id, stop));
  // Marked complete only now: a listing or comparison cut short never becomes a version.
  GRANARY_RETURN_IF_ERROR(changes.any() ? manifests_->markComplete(id, totals)
                                        : manifests_->drop(id));
  Logger("cache").info("dataset refreshed", {{"dataset", version.label()},
                                             {"generation", serving->key().generation},
                                             {"new_version", changes.any() ? next : int64_t{0}},
                                             {"added", changes.added},
                                             {"changed", changes.changed},
                                             {"removed", changes.removed}});
  return changes;
}

Result<std::vector<int64_t>> CacheEngine::listedVersions(const DatasetKey& key) const {
  const std::string prefix = key.ns + "/" + key.name + "/";
  GRANARY_ASSIGN_OR_RETURN(const auto ids, manifests_->completedGenerations(prefix));
  std::vector<int64_t> versions;
  for (const std::string& id : ids) {
    const std::string_view rest = std::string_view(id).substr(prefix.size());  // generation/uid
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos || rest.substr(slash + 1) != key.uid) continue;
    int64_t generation = 0;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + slash, generation);
    if (error == std::errc() && end == rest.data() + slash) versions.push_back(generation);
  }
  std::sort(versions.begin(), versions.end());
  return versions;
}

Result<int64_t> CacheEngine::purge(const DatasetKey& key, bool allGenerations) {
  std::vector<std::shared_ptr<DatasetCache>> doomed;
  {
    MutexLock lock(mutex_);
    if (const auto view = views_.find(key.label()); view != views_.end()) {
      if (allGenerations || view->second.key.generation == key.generation) {
        views_.erase(view);
        Logger("cache").info("view purged", {{"dataset", key.label()}});
        return int64_t{0};
      }
    }
    for (auto it = datasets_.begin(); it != datasets_.end();) {
      const DatasetKey& k = it->second->key();
      const bool match = k.ns == key.ns && k.name == key.name &&
                         (allGenerations || (k.generation == key.generation &&
                                             (key.uid.empty() || k.uid == key.uid)));
      if (match) {
        doomed.push_back(it->second);
        sourcesOf_.erase(it->first);
        it = datasets_.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (doomed.empty()) {
    // Not held in memory (e.g. after a restart): drop what the disks still hold.
    if (allGenerations || key.uid.empty()) {
      return notFound("dataset " + key.label() + " is not on this node");
    }
    GRANARY_ASSIGN_OR_RETURN(int64_t freed, chunks_->dropGeneration(key.id()));
    GRANARY_RETURN_IF_ERROR(manifests_->drop(key.id()));
    return freed;
  }
  int64_t freed = 0;
  for (auto& cache : doomed) {
    GRANARY_ASSIGN_OR_RETURN(int64_t bytes, cache->purge());
    freed += bytes;
  }
  Logger("cache").info("dataset purged", {{"dataset", key.label()}, {"freed_bytes", freed}});
  return freed;
}

std::optional<ChunkId> CacheEngine::holderOf(const DatasetKey& asking, const ManifestEntry& file,
                                             int64_t index) {
  MutexLock lock(mutex_);
  const auto own = sourcesOf_.find(asking.id());
  if (own == sourcesOf_.end()) return std::nullopt;
  for (const auto& [id, sources] : sourcesOf_) {
    if (id == own->first || sources != own->second) continue;
    const auto listed = manifests_->stat(id, file.path);
    if (!listed.isOk() || listed->etag != file.etag || listed->size != file.size) continue;
    ChunkId chunk{id, file.path, index};
    if (chunks_->contains(chunk)) return chunk;
  }
  return std::nullopt;
}

Result<std::shared_ptr<DatasetCache>> CacheEngine::find(const DatasetKey& key) const {
  MutexLock lock(mutex_);
  return findLocked(key);
}

Result<std::shared_ptr<DatasetCache>> CacheEngine::findLocked(const DatasetKey& key) const {
  std::shared_ptr<DatasetCache> best;
  for (const auto& [_, cache] : datasets_) {
    const DatasetKey& k = cache->key();
    if (k.ns != key.ns || k.name != key.name) continue;
    if (!key.uid.empty() && k.uid != key.uid) continue;
    if (key.generation != 0 && k.generation != key.generation) continue;
    if (!best || k.generation > best->key().generation) best = cache;
  }
  if (!best) {
    return notFound("dataset " + key.label() +
                    (key.generation ? " generation " + std::to_string(key.generation) : "") +
                    " is not on this node");
  }
  return best;
}

std::vector<std::shared_ptr<DatasetCache>> CacheEngine::datasets() const {
  MutexLock lock(mutex_);
  std::vector<std::shared_ptr<DatasetCache>> out;
  for (const auto& [_, cache] : datasets_) out.push_back(cache);
  return out;
}

}  // namespace granary::cache
