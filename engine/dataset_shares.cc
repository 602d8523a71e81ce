// DatasetCache's listing split among the nodes of its set: each node lists a share of the
// origin's parts and follows every other node's share, so that the set lists the origin once,
// side by side on every node, and each node stores the whole manifest.
#include <algorithm>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "engine/core/key_range.h"
#include "engine/core/placement.h"
#include "engine/dataset_cache.h"

namespace granary::cache {
namespace {

// The files and bytes the shares stored so far, summed for the progress.
class SharesStored {
 public:
  ManifestTotals add(std::span<const ManifestEntry> batch) {
    std::lock_guard lock(mutex_);
    for (const auto& entry : batch) totals_.files += 1, totals_.bytes += entry.size;
    return totals_;
  }

 private:
  std::mutex mutex_;
  ManifestTotals totals_;
};

}  // namespace

std::vector<std::string> DatasetCache::shareListers() const {
  const auto& sources = fetcher_.sources();
  if (!node_.peers || sources.size() != 1 || !sources.front().origin->listsInKeyOrder()) return {};
  MutexLock lock(mutex_);
  if (settings_.nodeSet.size() < 2) return {};
  return cache::ownersOf(key_.id(), settings_.nodeSet, settings_.nodeSet.size());
}

bool DatasetCache::inShare(std::span<const KeyRange> share, const ManifestEntry& entry) const {
  const auto& sources = fetcher_.sources();
  if (sources.size() != 1) return false;
  const std::string& mount = sources.front().mount;
  std::string_view key = entry.path;
  if (!mount.empty()) {
    if (!key.starts_with(mount + "/")) return false;
    key.remove_prefix(mount.size() + 1);
  }
  return inRanges(share, key);
}

Status DatasetCache::listInShares(const std::vector<std::string>& listers, std::stop_token stop) {
  GRANARY_RETURN_IF_ERROR(node_.manifests.drop(id_));  // a share is not resumed: start over
  if (listers.front() != node_.nodeName) {
    // Not waited for once it holds the dataset: a lister that lists in shares refuses it.
    const Status whole = followLister(listers.front(), false, stop);
    if (whole.isOk() || stop.stop_requested()) return whole;
    GRANARY_RETURN_IF_ERROR(node_.manifests.drop(id_));
  }
  warmer_.setPhase(Phase::kListing,
                   "listing the origin with the other cache nodes of the set, each a share of "
                   "it; files listed so far can be read, the rest as they are");
  Origin& origin = *fetcher_.sources().front().origin;
  GRANARY_ASSIGN_OR_RETURN(
      const std::vector<KeyRange> parts,
      origin.split(static_cast<size_t>(node_.listingConcurrency) * listers.size()));
  const auto shares = shareParts(parts, listers.size());
  const size_t mine = static_cast<size_t>(
      std::find(listers.begin(), listers.end(), node_.nodeName) - listers.begin());
  const Logger log = Logger("cache").with({{"dataset", key_.label()}});
  log.info("listing in shares with the set",
           {{"shares", shares.size()},
            {"parts", parts.size()},
            {"own_parts", mine < shares.size() ? shares[mine].size() : 0}});
  if (mine < shares.size()) {
    MutexLock lock(mutex_);
    ownShare_ = shares[mine];
    feed_.open();
  }
  beginListedShare();
  SharesStored stored;
  const auto took = [&](std::span<const ManifestEntry> batch) {
    setTotals(stored.add(batch));
    countListed(batch);
  };
  // The first share to fail ends the others.
  std::stop_source cutShort;
  const std::stop_callback stopping(stop, [&] { cutShort.request_stop(); });
  std::mutex failedMutex;
  Status failed = Status::ok();
  const auto takeShare = [&](size_t i) -> Result<ManifestTotals> {
    const std::stop_token cut = cutShort.get_token();
    if (i == mine) {
      auto listed = listShare(shares[i], cut, [&](auto batch, std::stop_token storing) {
        took(batch);
        feed_.publish(batch, storing);
      });
      MutexLock lock(mutex_);
      if (listed.isOk()) ownShareTotals_ = *listed;
      feed_.close(listed.status());
      return listed;
    }
    auto followed = follow(listers[i], shares[i], true, cut, took);
    if (followed.isOk() || cut.stop_requested()) return followed;
    log.warn("could not take a share of the listing from the node that lists it; listing it",
             {{"lister", listers[i]}, {"error", followed.status()}});
    return listShare(shares[i], cut, [&](auto batch, std::stop_token) { took(batch); });
  };
  std::vector<ManifestTotals> totals(shares.size());
  {
    std::vector<std::jthread> threads;
    for (size_t i = 0; i < shares.size(); ++i) {
      threads.emplace_back([&, i] {
        auto share = takeShare(i);
        std::lock_guard lock(failedMutex);
        if (share.isOk()) {
          totals[i] = *share;
        } else if (failed.isOk()) {
          failed = share.status();
          cutShort.request_stop();
        }
      });
    }
  }
  if (stop.stop_requested()) return cancelled("stopping");
  GRANARY_RETURN_IF_ERROR(failed);
  ManifestTotals listed;
  for (const auto& share : totals) listed.files += share.files, listed.bytes += share.bytes;
  setTotals(listed);
  return node_.manifests.markComplete(id_, listed);
}

Result<ManifestTotals> DatasetCache::listShare(const std::vector<KeyRange>& share,
                                               std::stop_token stop,
                                               const SourceListing::Stored& took) {
  ListingProgress progress{.ranges = share};
  const SourceListing listing{.manifests = node_.manifests,
                              .generation = id_,
                              .source = fetcher_.sources().front(),
                              .maxListers = node_.listingConcurrency,
                              .stored = took,
                              .recordProgress = false};
  GRANARY_RETURN_IF_ERROR(listSource(listing, progress, stop));
  return progress.totals;
}

}  // namespace granary::cache
