// A queue of at most `capacity` items from producers to consumers: push waits while it is full,
// pop while it is empty. Once closed, push refuses and pop hands out what is left, then ends.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <optional>
#include <utility>

#include "common/thread_annotations.h"

namespace granary {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}

  // Adds `item` once there is room; false, and `item` dropped, once the queue is closed.
  bool push(T item) {
    MutexLock lock(mutex_);
    changed_.wait(
        lock, [this]() GRANARY_REQUIRES(mutex_) { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    changed_.notify_all();
    return true;
  }

  // The oldest item, once there is one; nullopt once the queue is closed and empty.
  std::optional<T> pop() {
    MutexLock lock(mutex_);
    changed_.wait(lock, [this]() GRANARY_REQUIRES(mutex_) { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    std::optional<T> item(std::move(items_.front()));
    items_.pop_front();
    changed_.notify_all();
    return item;
  }

  void close() {
    MutexLock lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }

 private:
  const size_t capacity_;
  Mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<T> items_ GRANARY_GUARDED_BY(mutex_);
  bool closed_ GRANARY_GUARDED_BY(mutex_) = false;
};

}  // namespace granary
