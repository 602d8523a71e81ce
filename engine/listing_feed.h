// A listing in progress, handed to the peers that follow it: the node that lists a dataset from
// its origins publishes each batch it stores, and every follower gets every batch published
// after it began to follow (what was stored before, it reads from the manifest itself). Followers
// share one copy of each batch. A follower that lets kFollowerQueue batches pile up holds the
// listing back, for at most kSlowFollower; then it is dropped.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <span>
#include <stop_token>
#include <vector>

#include "common/result.h"
#include "common/thread_annotations.h"
#include "engine/store/manifest_store.h"

namespace granary::cache {

class ListingFeed {
 public:
  static constexpr size_t kFollowerQueue = 16;
  static constexpr std::chrono::seconds kSlowFollower{30};

  class Follower;
  // A batch as followers share it.
  using Batch = std::shared_ptr<const std::vector<ManifestEntry>>;

  explicit ListingFeed(std::chrono::milliseconds slowFollower = kSlowFollower)
      : slowFollower_(slowFollower) {}

  // An attempt at the listing starts: follow() answers until close().
  void open() GRANARY_EXCLUDES(mutex_);
  // Hands `batch` to every follower; waits while one has kFollowerQueue batches it has not
  // taken, at most the slow follower's time (then drops it) or until `stop`.
  void publish(std::span<const ManifestEntry> batch, std::stop_token stop) GRANARY_EXCLUDES(mutex_);
  // The attempt ended: OK when the listing is complete (stored and marked), else why not. Every
  // follower gets `end` once it has taken its batches.
  void close(const Status& end) GRANARY_EXCLUDES(mutex_);
  // Null while no attempt is open.
  std::shared_ptr<Follower> follow() GRANARY_EXCLUDES(mutex_);
  // Waits until `count` followers have come since open() (those gone since count too), at most
  // `most`, or until `stop`: a listing that waits for its followers before it begins spares them
  // reading what it stored before they came.
  void awaitFollowers(size_t count, std::chrono::milliseconds most, std::stop_token stop)
      GRANARY_EXCLUDES(mutex_);

 private:
  struct Queue;
  const std::chrono::milliseconds slowFollower_;
  Mutex mutex_;
  std::condition_variable_any changed_;  // waits on mutex_
  bool open_ GRANARY_GUARDED_BY(mutex_) = false;
  size_t came_ GRANARY_GUARDED_BY(mutex_) = 0;  // followers since open()
  std::vector<std::weak_ptr<Queue>> queues_ GRANARY_GUARDED_BY(mutex_);
};

class ListingFeed::Follower {
 public:
  Follower(ListingFeed& feed, std::shared_ptr<Queue> queue);
  ~Follower();
  // The next batch; an empty one when none came within `wait`; null once the listing is
  // complete; the listing's error, or Unavailable when this follower fell behind.
  Result<Batch> next(std::chrono::milliseconds wait);

 private:
  ListingFeed& feed_;
  std::shared_ptr<Queue> queue_;
};

}  // namespace granary::cache
