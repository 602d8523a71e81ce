#include "engine/source_listing.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <iterator>
#include <list>
#include <thread>
#include <vector>

#include "common/bounded_queue.h"
#include "common/thread_annotations.h"
#include "engine/core/listing_pace.h"

namespace granary::cache {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Pages of a part fetched and parsed while earlier ones wait to be stored.
constexpr size_t kPagesAhead = 4;

std::string joinPath(const std::string& mount, const std::string& path) {
  return mount.empty() ? path : mount + "/" + path;
}

// The listers a listing of `parts` starts with.
int startingListers(const SourceListing& listing, size_t parts) {
  if (listing.paced) return 1;
  return static_cast<int>(
      std::clamp<size_t>(parts, 1, static_cast<size_t>(std::max(1, listing.maxListers))));
}

// The listers of one source and what they share.
class PartListers {
 public:
  PartListers(const SourceListing& listing, ListingProgress& progress, std::stop_token stop)
      : listing_(listing),
        progress_(progress),
        parts_(progress.ranges),
        stopping_(stop, [this] { cutShort_.request_stop(); }),
        pace_(std::max(1, listing.maxListers), startingListers(listing, progress.ranges.size())) {}

  // Lists every part on this thread and the others started with it or added by the pace; returns
  // once all have ended.
  Status run() {
    {
      MutexLock lock(mutex_);
      for (int other = 1; other < pace_.listers(); ++other)
        others_.emplace_back([this] { lister(); });
    }
    lister();
    for (size_t joined = 0;; ++joined) {
      std::jthread* other = nullptr;
      {
        MutexLock lock(mutex_);
        if (joined == others_.size()) return failed_;
        other = &*std::next(others_.begin(), static_cast<std::ptrdiff_t>(joined));
      }
      other->join();  // a list's elements stay where they are while others are added
    }
  }

 private:
  // Takes parts until none is left or the listing is cut short.
  void lister() {
    for (;;) {
      const KeyRange* part = nullptr;
      {
        MutexLock lock(mutex_);
        if (next_ == parts_.size() || cutShort_.stop_requested()) {
          pace_.listerEnded();
          return;
        }
        part = &parts_[next_++];
      }
      const Status listed = listPart(*part);
      if (listed.isOk()) continue;
      MutexLock lock(mutex_);
      if (failed_.isOk() && !cutShort_.stop_requested()) failed_ = listed;
      cutShort_.request_stop();
    }
  }

  // Lists `part` whole; then it is left out of the progress, and the source once none is left.
  // Its pages are stored on a thread of their own, up to kPagesAhead behind the origin, so that
  // fetching and parsing a page overlaps storing the one before it.
  Status listPart(const KeyRange& part) {
    BoundedQueue<std::vector<OriginObject>> pages(kPagesAhead);
    std::atomic<int64_t> lastStoreNanos{0};
    Status stored = Status::ok();  // the storer's error, read once it has ended
    std::jthread storer([&] {
      while (auto page = pages.pop()) {
        const auto start = SteadyClock::now();
        stored = store(part, std::move(*page));
        if (!stored.isOk()) {
          pages.close();
          return;
        }
        lastStoreNanos = std::chrono::nanoseconds(SteadyClock::now() - start).count();
      }
    });
    auto last = SteadyClock::now();
    const auto each = [&](std::vector<OriginObject>&& page) -> Status {
      const auto came = SteadyClock::now();
      if (!pages.push(std::move(page))) return cancelled("the listing's store failed");
      paced(came - last, std::chrono::nanoseconds(lastStoreNanos.load()));
      last = SteadyClock::now();
      return Status::ok();
    };
    Origin& origin = *listing_.source.origin;
    const Status listed =
        origin.listsInKeyOrder() ? origin.listRange(part, each) : origin.list(each);
    pages.close();
    storer.join();
    GRANARY_RETURN_IF_ERROR(stored);
    GRANARY_RETURN_IF_ERROR(listed);
    MutexLock lock(storing_);
    std::erase_if(progress_.ranges, [&](const KeyRange& r) { return r.through == part.through; });
    if (progress_.ranges.empty()) progress_.source += 1;
    if (!listing_.recordProgress) return Status::ok();
    return listing_.manifests.put(listing_.generation, {}, &progress_);
  }

  // Stores a batch of `part` with the progress it makes.
  Status store(const KeyRange& part, std::vector<OriginObject>&& batch) {
    if (cutShort_.stop_requested()) return cancelled("stopping");
    if (batch.empty()) return Status::ok();
    std::vector<ManifestEntry> entries;
    entries.reserve(batch.size());
    ManifestTotals added;
    for (auto& object : batch) {
      entries.push_back({.path = joinPath(listing_.source.mount, object.path),
                         .size = object.size,
                         .etag = std::move(object.etag),
                         .modifiedUnixNanos = object.modifiedUnixNanos,
                         .mode = object.mode});
      added.files += 1;
      added.bytes += object.size;
    }
    {
      MutexLock lock(storing_);
      for (KeyRange& range : progress_.ranges) {
        if (range.through == part.through) range.after = batch.back().path;
      }
      progress_.totals.files += added.files;
      progress_.totals.bytes += added.bytes;
      GRANARY_RETURN_IF_ERROR(listing_.manifests.put(
          listing_.generation, entries, listing_.recordProgress ? &progress_ : nullptr));
      if (listing_.counted) listing_.counted(progress_.totals);
    }
    if (listing_.stored) listing_.stored(entries, cutShort_.get_token());
    return Status::ok();
  }

  // A page came after `waited`, and the last one stored took `stored`: another lister, if that
  // pays and a part is left for it.
  void paced(SteadyClock::duration waited, SteadyClock::duration stored) {
    MutexLock lock(mutex_);
    if (next_ < parts_.size() && !cutShort_.stop_requested() && pace_.page(waited, stored)) {
      others_.emplace_back([this] { lister(); });
    }
  }

  const SourceListing& listing_;
  // Batches are stored one at a time, each with the progress made by all before it; a page
  // stored does not hold up the pace of the next one's fetch (mutex_).
  Mutex storing_;
  ListingProgress& progress_ GRANARY_GUARDED_BY(storing_);
  Mutex mutex_;
  const std::vector<KeyRange> parts_;
  std::stop_source cutShort_;
  const std::stop_callback<std::function<void()>> stopping_;
  size_t next_ GRANARY_GUARDED_BY(mutex_) = 0;  // the next part to take
  ListingPace pace_ GRANARY_GUARDED_BY(mutex_);
  std::list<std::jthread> others_ GRANARY_GUARDED_BY(mutex_);
  Status failed_ GRANARY_GUARDED_BY(mutex_) = Status::ok();
};

}  // namespace

Status listSource(const SourceListing& listing, ListingProgress& progress, std::stop_token stop) {
  if (progress.ranges.empty()) {
    progress.source += 1;
    return listing.manifests.put(listing.generation, {}, &progress);
  }
  Status listed = PartListers(listing, progress, stop).run();
  // The listers' threads freed their pages into malloc arenas of their own, which glibc keeps:
  // hand those pages back, or a node that listed side by side holds them for its whole life.
  ::malloc_trim(0);
  GRANARY_RETURN_IF_ERROR(listed);
  if (stop.stop_requested()) return cancelled("stopping");
  return Status::ok();
}

}  // namespace granary::cache
