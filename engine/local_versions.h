// Versions of a dataset in local mode (granaryctl mount and run), where no operator keeps them:
// a refresh (CacheEngine::refresh) that finds the origin changed makes the next version, which is
// served from then on, by this command and the ones after it; the versions before it are held
// (warm Never) until the new one is Ready, since the new one takes the chunks of its unchanged
// files from them rather than from the origin, and then purged.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "engine/engine.h"

namespace granary::cache {

// Ensures the version of `spec`'s dataset local mode serves: the newest one listed whole on this
// node at or above spec.key.generation (a refresh made it), else spec.key.generation itself; the
// older ones listed whole are held (warm Never) for its unchanged files until it is Ready.
Result<std::shared_ptr<DatasetCache>> ensureNewestVersion(CacheEngine& engine, EnsureSpec spec);

struct LocalRefresh {
  std::shared_ptr<DatasetCache> serving;  // the newest version: made by the refresh, or as it was
  std::string summary;                    // what the refresh found, in a line
};

// Lists the origins of `serving` again. A change makes the next version, ensured with `spec`'s
// settings and returned to be served; the one before is held, warm Never. A version not listed
// whole yet is not refreshed: its own listing is the newest there is. `listed` gets the totals
// listed so far after each batch.
Result<LocalRefresh> refreshLocally(CacheEngine& engine, std::shared_ptr<DatasetCache> serving,
                                    EnsureSpec spec, std::stop_token stop,
                                    const std::function<void(const ManifestTotals&)>& listed = {});

// A `listed` for refreshLocally that says "refreshing: N files listed" through `say` at the first
// batch, then every `period` at most, since listing a large origin again takes minutes.
std::function<void(const ManifestTotals&)> listingReporter(
    std::function<void(const std::string&)> say,
    std::chrono::milliseconds period = std::chrono::seconds(2));

// Purges the versions of `newest`'s dataset below it once it is Ready (each of its files taken
// from the version before or fetched); returns whether it did.
bool retireOlderVersions(CacheEngine& engine, DatasetCache& newest);

}  // namespace granary::cache
