#include "engine/listing_feed.h"

#include <algorithm>
#include <optional>

namespace granary::cache {

// Guarded by the feed's mutex.
struct ListingFeed::Queue {
  std::deque<Batch> batches;
  std::optional<Status> end;  // set once: the listing's end, or why this follower was dropped
};

void ListingFeed::open() {
  MutexLock lock(mutex_);
  open_ = true;
  came_ = 0;
}

void ListingFeed::publish(std::span<const ManifestEntry> entries, std::stop_token stop) {
  MutexLock lock(mutex_);
  std::erase_if(queues_, [](const std::weak_ptr<Queue>& queue) { return queue.expired(); });
  if (queues_.empty()) return;
  const Batch batch =
      std::make_shared<const std::vector<ManifestEntry>>(entries.begin(), entries.end());
  const auto roomForAll = [&]() GRANARY_REQUIRES(mutex_) {
    return std::all_of(queues_.begin(), queues_.end(), [](const std::weak_ptr<Queue>& weak) {
      const auto queue = weak.lock();
      return !queue || queue->end || queue->batches.size() < kFollowerQueue;
    });
  };
  changed_.wait_for(lock, stop, slowFollower_, roomForAll);
  for (const auto& weak : queues_) {
    const auto queue = weak.lock();
    if (!queue || queue->end) continue;
    if (queue->batches.size() >= kFollowerQueue) {
      queue->end =
          unavailable("fell behind the listing: " + std::to_string(kFollowerQueue) +
                      " batches not taken for " + std::to_string(slowFollower_.count()) + " ms");
      continue;
    }
    queue->batches.push_back(batch);
  }
  changed_.notify_all();
}

void ListingFeed::close(const Status& end) {
  MutexLock lock(mutex_);
  open_ = false;
  for (const auto& weak : queues_) {
    if (const auto queue = weak.lock(); queue && !queue->end) queue->end = end;
  }
  queues_.clear();
  changed_.notify_all();
}

std::shared_ptr<ListingFeed::Follower> ListingFeed::follow() {
  MutexLock lock(mutex_);
  if (!open_) return nullptr;
  auto queue = std::make_shared<Queue>();
  queues_.push_back(queue);
  ++came_;
  changed_.notify_all();
  return std::make_shared<Follower>(*this, std::move(queue));
}

void ListingFeed::awaitFollowers(size_t count, std::chrono::milliseconds most,
                                 std::stop_token stop) {
  MutexLock lock(mutex_);
  changed_.wait_for(lock, stop, most, [&]() GRANARY_REQUIRES(mutex_) { return came_ >= count; });
}

ListingFeed::Follower::Follower(ListingFeed& feed, std::shared_ptr<Queue> queue)
    : feed_(feed), queue_(std::move(queue)) {}

ListingFeed::Follower::~Follower() {
  MutexLock lock(feed_.mutex_);
  queue_.reset();
  feed_.changed_.notify_all();  // a publisher waiting for this follower's room goes on
}

Result<ListingFeed::Batch> ListingFeed::Follower::next(std::chrono::milliseconds wait) {
  MutexLock lock(feed_.mutex_);
  feed_.changed_.wait_for(lock, wait, [&] { return !queue_->batches.empty() || queue_->end; });
  if (!queue_->batches.empty()) {
    Batch batch = std::move(queue_->batches.front());
    queue_->batches.pop_front();
    feed_.changed_.notify_all();
    return batch;
  }
  if (!queue_->end) return std::make_shared<const std::vector<ManifestEntry>>();
  GRANARY_RETURN_IF_ERROR(*queue_->end);
  return Batch();
}

}  // namespace granary::cache
