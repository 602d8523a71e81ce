#include "engine/local_versions.h"

#include <algorithm>

namespace granary::cache {
namespace {

std::string summaryOf(const ManifestChanges& changes, int64_t version) {
  if (!changes.any())
    return "refreshed: the origin is unchanged (" + std::to_string(changes.unchanged) + " files)";
  return "refreshed: version " + std::to_string(version) + ", " + std::to_string(changes.added) +
         " added, " + std::to_string(changes.changed) + " changed, " +
         std::to_string(changes.removed) + " removed, " + std::to_string(changes.unchanged) +
         " unchanged";
}

// The version held for the newest to take unchanged files from: no warming of its own.
EnsureSpec heldSpec(EnsureSpec spec, int64_t generation) {
  spec.key.generation = generation;
  spec.settings.warm = WarmMode::kNever;
  return spec;
}

}  // namespace

Result<std::shared_ptr<DatasetCache>> ensureNewestVersion(CacheEngine& engine, EnsureSpec spec) {
  GRANARY_ASSIGN_OR_RETURN(const std::vector<int64_t> listed, engine.listedVersions(spec.key));
  std::vector<int64_t> versions;
  for (int64_t v : listed)
    if (v >= spec.key.generation) versions.push_back(v);
  if (versions.empty()) return engine.ensure(std::move(spec));
  // The older ones are held until the newest is Ready (retireOlderVersions): it may still take
  // unchanged files from any of them.
  for (size_t i = 0; i + 1 < versions.size(); ++i)
    GRANARY_RETURN_IF_ERROR(engine.ensure(heldSpec(spec, versions[i])).status());
  spec.key.generation = versions.back();
  return engine.ensure(std::move(spec));
}

Result<LocalRefresh> refreshLocally(CacheEngine& engine, std::shared_ptr<DatasetCache> serving,
                                    EnsureSpec spec, std::stop_token stop,
                                    const std::function<void(const ManifestTotals&)>& listed) {
  const int64_t current = serving->key().generation, next = current + 1;
  GRANARY_ASSIGN_OR_RETURN(const std::vector<int64_t> whole, engine.listedVersions(spec.key));
  if (std::find(whole.begin(), whole.end(), current) == whole.end())
    return LocalRefresh{std::move(serving), "not refreshed: the first listing is the newest"};
  GRANARY_ASSIGN_OR_RETURN(const ManifestChanges changes,
                           engine.refresh(serving->key(), next, stop, listed));
  if (!changes.any()) return LocalRefresh{std::move(serving), summaryOf(changes, current)};
  GRANARY_RETURN_IF_ERROR(engine.ensure(heldSpec(spec, current)).status());
  spec.key.generation = next;
  GRANARY_ASSIGN_OR_RETURN(auto made, engine.ensure(std::move(spec)));
  return LocalRefresh{std::move(made), summaryOf(changes, next)};
}

std::function<void(const ManifestTotals&)> listingReporter(
    std::function<void(const std::string&)> say, std::chrono::milliseconds period) {
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();  // the first batch says
  return [say = std::move(say), period, last](const ManifestTotals& totals) {
    const auto now = std::chrono::steady_clock::now();
    if (now - *last < period) return;
    *last = now;
    say("refreshing: " + std::to_string(totals.files) + " files listed");
  };
}

bool retireOlderVersions(CacheEngine& engine, DatasetCache& newest) {
  if (newest.state().phase != Phase::kReady) return false;
  const DatasetKey& key = newest.key();
  auto listed = engine.listedVersions(key);
  if (!listed.isOk()) return false;
  for (int64_t v : *listed) {
    if (v >= key.generation) continue;
    DatasetKey old = key;
    old.generation = v;
    if (auto purged = engine.purge(old, false); !purged.isOk()) return false;
  }
  return true;
}

}  // namespace granary::cache
