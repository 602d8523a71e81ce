// DatasetCache's listing: the background thread that fills the generation's manifest, once, from
// the origins or from the node of the set that lists them, and what it shares with peers that
// follow it (engine/listing_feed.h).
#include <algorithm>
#include <chrono>
#include <iterator>

#include "common/backoff.h"
#include "common/log.h"
#include "engine/core/placement.h"
#include "engine/dataset_cache.h"
#include "engine/source_listing.h"

namespace granary::cache {
namespace {

constexpr size_t kShareBatch = 1000;
// How long a follower's heartbeat may be apart while the listing goes on.
constexpr std::chrono::seconds kHeartbeat{1};

}  // namespace

std::string DatasetCache::listerOf(int64_t generation) const {
  DatasetKey version = key_;
  version.generation = generation;
  MutexLock lock(mutex_);
  return cache::ownersOf(version.id(), settings_.nodeSet, 1).front();
}

Status DatasetCache::listOnce(std::stop_token stop) {
  if (auto totals = node_.manifests.totals(id_); totals.isOk()) {
    setTotals(*totals);
    return Status::ok();
  }
  const std::vector<std::string> listers = shareListers();
  {
    MutexLock lock(mutex_);
    ++listingTry_;
    listsInShares_ = !listers.empty();
    ownShare_.clear();
    ownShareTotals_.reset();
  }
  if (!listers.empty()) return listInShares(listers, stop);
  const std::string lister = listerOf();
  const bool follows = lister != node_.nodeName && node_.peers;
  ListingProgress start;
  if (follows) {
    GRANARY_RETURN_IF_ERROR(node_.manifests.drop(id_));  // a listing cut short: start over
  } else {
    GRANARY_ASSIGN_OR_RETURN(start, listingStart(id_));
  }
  feed_.open();
  Status listed = Status::ok();
  if (follows) {
    listed = followLister(lister, {}, stop);
    if (!listed.isOk() && !stop.stop_requested()) {
      Logger("cache")
          .with({{"dataset", key_.label()}})
          .warn("could not take the listing from the node that lists it; listing the origin",
                {{"lister", lister}, {"error", listed}});
      warmer_.setPhase(Phase::kListing, "listing the origin (cache node " + lister +
                                            ", which lists it, could not be followed); files "
                                            "listed so far can be read, the rest as they are");
      feed_.close(listed);  // its followers start over, as this node does
      feed_.open();
      listed = node_.manifests.drop(id_);
      if (listed.isOk()) listed = listFromOrigins(stop, {});
    }
  } else {
    listed = listFromOrigins(stop, std::move(start));
  }
  feed_.close(listed);
  return listed;
}

Result<ListingProgress> DatasetCache::listingStart(const std::string& id) {
  auto progress = node_.manifests.progress(id);
  const auto& sources = fetcher_.sources();
  // A source not begun, or one whose parts go on where they stood.
  const auto resumable = [&](const ListingProgress& p) {
    if (p.ranges.empty()) return p.source <= sources.size();
    return p.source < sources.size() && sources[p.source].origin->listsInKeyOrder();
  };
  if (progress.isOk() && resumable(*progress)) {
    Logger("cache")
        .with({{"dataset", key_.label()}})
        .info("going on with the listing where it was cut short",
              {{"generation", id},
               {"source", progress->source},
               {"parts_left", progress->ranges.size()},
               {"files_stored", progress->totals.files}});
    return std::move(*progress);
  }
  if (!progress.isOk() && progress.status().code() != StatusCode::kNotFound) {
    return progress.status();
  }
  GRANARY_RETURN_IF_ERROR(node_.manifests.drop(id));  // a listing cut short: start over
  return ListingProgress{};
}

Status DatasetCache::listFromOrigins(std::stop_token stop, ListingProgress from) {
  setTotals(from.totals);
  beginListedShare();
  GRANARY_ASSIGN_OR_RETURN(
      const ManifestTotals totals,
      listOrigins(
          id_, std::move(from), stop, [this](const ManifestTotals& t) { setTotals(t); },
          [this](std::span<const ManifestEntry> batch, std::stop_token cut) {
            countListed(batch);
            feed_.publish(batch, cut);
          }));
  return node_.manifests.markComplete(id_, totals);
}

Result<ManifestTotals> DatasetCache::listVersion(
    const std::string& id, std::stop_token stop,
    const std::function<void(const ManifestTotals&)>& counted) {
  if (!node_.manifests.totals(id_).isOk())
    return failedPrecondition("dataset " + key_.label() + " is not listed whole yet");
  // From the start: what an earlier try stored is as old as that try.
  GRANARY_RETURN_IF_ERROR(node_.manifests.drop(id));
  return listOrigins(id, ListingProgress{}, stop, counted, {});
}

Result<ManifestTotals> DatasetCache::listOrigins(
    const std::string& id, ListingProgress from, std::stop_token stop,
    const std::function<void(const ManifestTotals&)>& counted,
    const SourceListing::Stored& stored) {
  ListingProgress progress = std::move(from);
  const auto& sources = fetcher_.sources();
  while (progress.source < sources.size()) {
    Origin& origin = *sources[progress.source].origin;
    if (progress.ranges.empty()) {
      GRANARY_ASSIGN_OR_RETURN(progress.ranges,
                               origin.split(static_cast<size_t>(node_.listingConcurrency)));
    }
    const SourceListing listing{.manifests = node_.manifests,
                                .generation = id,
                                .source = sources[progress.source],
                                .maxListers = node_.listingConcurrency,
                                .counted = counted,
                                .stored = stored};
    GRANARY_RETURN_IF_ERROR(listSource(listing, progress, stop));
  }
  return progress.totals;
}

Status DatasetCache::followLister(const std::string& lister, FollowWait wait,
                                  std::stop_token stop) {
  warmer_.setPhase(Phase::kListing, "taking the listing from cache node " + lister +
                                        ", which lists the origin; files listed so far can be "
                                        "read, the rest as they are");
  ManifestTotals counted;  // a file may come twice: the lister's totals are the listing's
  beginListedShare();
  auto totals = follow(lister, {}, wait, stop, [&](std::span<const ManifestEntry> batch) {
    for (const auto& entry : batch) counted.files += 1, counted.bytes += entry.size;
    setTotals(counted);
    countListed(batch);
    feed_.publish(batch, stop);
  });
  if (!totals.isOk()) return totals.status();
  setTotals(*totals);
  return node_.manifests.markComplete(id_, *totals);
}

Result<ManifestTotals> DatasetCache::follow(
    const std::string& lister, std::span<const KeyRange> share, FollowWait wait,
    std::stop_token stop, const std::function<void(std::span<const ManifestEntry>)>& took) {
  Backoff backoff(
      {.initial = std::chrono::milliseconds(100), .max = std::chrono::milliseconds(500)});
  const auto giveUp = node_.clock.monoNow() + wait.most;
  for (;;) {
    auto totals = node_.peers->followListing(
        lister, key_, share, stop, [&](std::span<const ManifestEntry> batch) -> Status {
          std::vector<ManifestEntry> inside;  // what is sent beyond the share asked is not taken
          if (!share.empty()) {
            std::copy_if(batch.begin(), batch.end(), std::back_inserter(inside),
                         [&](const ManifestEntry& entry) { return inShare(share, entry); });
            batch = inside;
          }
          if (batch.empty()) return Status::ok();
          GRANARY_RETURN_IF_ERROR(node_.manifests.put(id_, batch));
          took(batch);
          return Status::ok();
        });
    if (totals.isOk()) return totals;
    // NotFound: the lister does not hold the dataset yet. FailedPrecondition: it holds it but is
    // not listing now (its listing thread has not begun, or waits to try a failed origin again).
    const StatusCode code = totals.status().code();
    const bool awaited =
        code == StatusCode::kNotFound || (wait.listing && code == StatusCode::kFailedPrecondition);
    if (!awaited || node_.clock.monoNow() >= giveUp) return totals.status();
    if (!node_.clock.sleepFor(backoff.next(), stop)) return cancelled("stopping");
  }
}

Result<ManifestTotals> DatasetCache::shareListing(
    std::span<const KeyRange> share,
    const std::function<Status(std::span<const ManifestEntry>)>& send) {
  const bool complete = node_.manifests.totals(id_).isOk();
  std::shared_ptr<ListingFeed::Follower> follower;
  bool feeds = false, shareListed = false;
  int64_t listingTry;
  {
    MutexLock lock(mutex_);
    listingTry = listingTry_;
    feeds = share.empty() ? !listsInShares_ : std::ranges::equal(share, ownShare_);
    if (feeds) {
      follower = feed_.follow();  // first: what is stored after this comes through it
      shareListed = ownShareTotals_.has_value();
    } else if (!share.empty() && !ownShare_.empty() && !complete) {
      return conflict("cache node " + node_.nodeName + " lists another share of dataset " +
                      key_.label() + " (its split of the origin differs)");
    }
  }
  if (!follower && !shareListed && !complete) {
    return failedPrecondition("cache node " + node_.nodeName + " is not listing dataset " +
                              key_.label() + (share.empty() ? "" : " (or not that share of it)") +
                              " now: " + state().message);
  }
  ManifestTotals sent;  // of the share, read from a complete manifest
  std::string cursor;
  for (;;) {
    GRANARY_ASSIGN_OR_RETURN(auto batch, node_.manifests.files(id_, cursor, kShareBatch));
    if (batch.empty()) break;
    if (!share.empty())
      std::erase_if(batch, [&](const ManifestEntry& entry) { return !inShare(share, entry); });
    for (const auto& entry : batch) sent.files += 1, sent.bytes += entry.size;
    GRANARY_RETURN_IF_ERROR(send(batch));
  }
  while (follower) {
    GRANARY_ASSIGN_OR_RETURN(const ListingFeed::Batch batch, follower->next(kHeartbeat));
    if (!batch) break;  // complete
    GRANARY_RETURN_IF_ERROR(send(*batch));
  }
  if (share.empty()) return node_.manifests.totals(id_);
  MutexLock lock(mutex_);
  // The manifest read may have been dropped under it by a try that started over.
  if (listingTry_ != listingTry)
    return unavailable("cache node " + node_.nodeName + " started its listing of dataset " +
                       key_.label() + " over");
  if (!feeds) return sent;  // another node's share, read from a complete manifest
  if (ownShareTotals_) return *ownShareTotals_;
  return unavailable("cache node " + node_.nodeName + " ended its share of the listing early");
}

void DatasetCache::setTotals(const ManifestTotals& totals) {
  MutexLock lock(mutex_);
  progress_.totalFiles = totals.files;
  progress_.totalBytes = totals.bytes;
  changed_.notify_all();  // a peer's read may wait for a path (statForPeer)
}

void DatasetCache::run(std::stop_token stop) {
  const Logger log = Logger("cache").with({{"dataset", key_.label()}});
  // Only a spec that can never work ends the listing; an origin that cannot be reached yet (a
  // directory not mounted, a server down, a bucket not made) is tried again with backoff.
  Backoff backoff({.initial = std::chrono::seconds(1), .max = kListRetryMax});
  const auto began = std::chrono::steady_clock::now();
  for (;;) {
    warmer_.setPhase(Phase::kListing,
                     "listing the origin; files listed so far can be read, the rest as they are");
    const Status listed = listOnce(stop);
    if (listed.isOk()) break;
    if (stop.stop_requested()) return;
    if (listed.code() == StatusCode::kInvalidArgument) {
      log.error("listing failed", {{"error", listed}});
      warmer_.setPhase(Phase::kFailed, "listing the origin failed: " + listed.message());
      MutexLock lock(mutex_);
      listFailed_ = true;
      changed_.notify_all();
      return;
    }
    const auto delay = backoff.next();
    log.warn("listing failed; tried again", {{"error", listed}, {"retry_in", delay}});
    // The same words every try, so that the Dataset's status is not rewritten for each.
    warmer_.setPhase(Phase::kPending, "waiting for the origin: " + listed.message() +
                                          "; listed again with backoff, up to " +
                                          std::to_string(kListRetryMax.count()) + " s apart");
    setListAwaited(true);
    if (!node_.clock.sleepFor(delay, stop)) return;
    setListAwaited(false);
  }
  int64_t files;
  {
    MutexLock lock(mutex_);
    listed_ = true;
    files = progress_.totalFiles;
    changed_.notify_all();
  }
  log.info("listed",
           {{"generation", key_.generation},
            {"files", files},
            {"seconds",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count()}});
  warmer_.start();
}

void DatasetCache::setListAwaited(bool awaited) {
  MutexLock lock(mutex_);
  listAwaited_ = awaited;
  changed_.notify_all();
}

}  // namespace granary::cache
