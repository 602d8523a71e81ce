// DatasetCache's listing split among the nodes of its set: each node lists a share of the
// origin's parts and follows every other node's share, so that the set lists the origin once,
// side by side on every node, and each node stores the whole manifest.
#include <algorithm>
#include <thread>

#include "common/log.h"
#include "common/thread_annotations.h"
#include "engine/core/key_range.h"
#include "engine/core/placement.h"
#include "engine/dataset_cache.h"

namespace granary::cache {
namespace {

// How long a node waits for the other nodes of the set to follow its share before it lists it.
constexpr std::chrono::seconds kFollowersWait{2};
// How long a node waits for the first node of the set to hold the dataset, which may hold the
// version whole, before it lists its share.
constexpr std::chrono::seconds kWholeWait{5};

// What the shares of a listing took: the files and bytes stored so far (the progress), and once
// they end, the sum of their totals or the first failure.
class SharesTaken {
 public:
  // A batch was stored; the progress then.
  ManifestTotals stored(std::span<const ManifestEntry> batch) GRANARY_EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    for (const auto& entry : batch) stored_.files += 1, stored_.bytes += entry.size;
    return stored_;
  }
  // A share ended; true when it is the first to fail.
  bool ended(const Result<ManifestTotals>& share) GRANARY_EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    if (share.isOk()) {
      listed_.files += share->files;
      listed_.bytes += share->bytes;
      return false;
    }
    if (!failed_.isOk()) return false;
    failed_ = share.status();
    return true;
  }
  Result<ManifestTotals> listed() const GRANARY_EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    if (!failed_.isOk()) return failed_;
    return listed_;
  }

 private:
  mutable Mutex mutex_;
  ManifestTotals stored_ GRANARY_GUARDED_BY(mutex_);
  ManifestTotals listed_ GRANARY_GUARDED_BY(mutex_);
  Status failed_ GRANARY_GUARDED_BY(mutex_) = Status::ok();
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
  if (!mount.empty()) {  // the path is mount + "/" + key (no string built: a batch's filter)
    if (!key.starts_with(mount) || key.size() <= mount.size() || key[mount.size()] != '/')
      return false;
    key.remove_prefix(mount.size() + 1);
  }
  return inRanges(share, key);
}

Status DatasetCache::listInShares(const std::vector<std::string>& listers, std::stop_token stop) {
  GRANARY_RETURN_IF_ERROR(node_.manifests.drop(id_));  // a share is not resumed: start over
  if (listers.front() != node_.nodeName) {
    // Not waited for once it holds the dataset: a lister that lists in shares refuses it.
    const Status whole =
        followLister(listers.front(), {.most = kWholeWait, .listing = false}, stop);
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
  Logger("cache")
      .with({{"dataset", key_.label()}})
      .info("listing in shares with the set",
            {{"shares", shares.size()},
             {"parts", parts.size()},
             {"own_parts", mine < shares.size() ? shares[mine].size() : 0}});
  if (mine < shares.size()) {
    MutexLock lock(mutex_);
    ownShare_ = shares[mine];
    feed_.open();
  }
  beginListedShare();
  GRANARY_ASSIGN_OR_RETURN(const ManifestTotals totals, takeShares(listers, shares, mine, stop));
  setTotals(totals);
  return node_.manifests.markComplete(id_, totals);
}

Result<ManifestTotals> DatasetCache::takeShares(const std::vector<std::string>& listers,
                                                const std::vector<std::vector<KeyRange>>& shares,
                                                size_t mine, std::stop_token stop) {
  SharesTaken taken;
  const auto took = [&](std::span<const ManifestEntry> batch) {
    setTotals(taken.stored(batch));
    countListed(batch);
  };
  std::stop_source cutShort;
  const std::stop_callback stopping(stop, [&] { cutShort.request_stop(); });
  {
    std::vector<std::jthread> threads;
    for (size_t i = 0; i < shares.size(); ++i) {
      threads.emplace_back([&, i] {
        const auto share = takeShare(listers[i], shares[i], i == mine, cutShort.get_token(), took);
        if (taken.ended(share)) cutShort.request_stop();
      });
    }
  }
  if (stop.stop_requested()) return cancelled("stopping");
  return taken.listed();
}

Result<ManifestTotals> DatasetCache::takeShare(
    const std::string& lister, const std::vector<KeyRange>& share, bool own, std::stop_token stop,
    const std::function<void(std::span<const ManifestEntry>)>& took) {
  if (own) return listOwnShare(share, stop, took);
  const SourceListing::Stored listedHere = [&](auto batch, std::stop_token) { took(batch); };
  bool listsItself;
  {
    MutexLock lock(mutex_);
    listsItself = listsItself_.contains(lister);
  }
  if (listsItself) return listShare(share, stop, listedHere);
  int64_t stored = 0;
  auto followed = follow(lister, share, {}, stop, [&](std::span<const ManifestEntry> batch) {
    stored += static_cast<int64_t>(batch.size());
    took(batch);
  });
  if (followed.isOk() || stop.stop_requested()) return followed;
  const Logger log = Logger("cache").with({{"dataset", key_.label()}});
  if (stored == 0) {
    log.warn("could not take a share of the listing from the node that lists it; listing it",
             {{"lister", lister}, {"error", followed.status()}});
    return listShare(share, stop, listedHere);
  }
  // What it took stays in the manifest: this try ends, and the next starts over and lists that
  // share itself.
  log.warn("a share of the listing broke off part-way; listing again, that share from the origin",
           {{"lister", lister}, {"error", followed.status()}});
  MutexLock lock(mutex_);
  listsItself_.insert(lister);
  return Status(followed.status().code(),
                "cache node " + lister +
                    "'s share of the listing broke off part-way: " + followed.status().message());
}

Result<ManifestTotals> DatasetCache::listOwnShare(
    const std::vector<KeyRange>& share, std::stop_token stop,
    const std::function<void(std::span<const ManifestEntry>)>& took) {
  size_t followers;
  {
    MutexLock lock(mutex_);
    followers = settings_.nodeSet.size() - 1;
  }
  feed_.awaitFollowers(followers, kFollowersWait, stop);
  auto listed = listShare(share, stop, [&](auto batch, std::stop_token storing) {
    took(batch);
    feed_.publish(batch, storing);
  });
  MutexLock lock(mutex_);  // a follower that comes now finds the totals or the feed
  if (listed.isOk()) ownShareTotals_ = *listed;
  feed_.close(listed.status());
  return listed;
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
                              .recordProgress = false,
                              .paced = false};
  GRANARY_RETURN_IF_ERROR(listSource(listing, progress, stop));
  return progress.totals;
}

}  // namespace granary::cache
