// Buffers of fetched chunks used again once their last reader lets go. A chunk fetched from a
// peer or the origin is new memory otherwise: page faults, the kernel zeroing every page and
// std::string zeroing it again, a fifth of a receiving node's CPU at the wire's speed (and a sixth
// for 100 KiB files). A buffer given out by share() comes back when its last owner drops it;
// take() hands it out again for a chunk of about its size (never one much larger: what holds a
// chunk counts its size, not its buffer's), its bytes left as they were (none zeroed when its
// size is the one asked for). Buffers wait up to `keepBytes` in all; beyond, those that came back
// longest ago are freed.
//
// Thread-safety: every method may be called from any thread; shared buffers may outlive the pool.
#pragma once

#include <cstddef>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "common/thread_annotations.h"

namespace granary::cache {

class ChunkBuffers {
 public:
  explicit ChunkBuffers(size_t keepBytes) : shelf_(std::make_shared<Shelf>(keepBytes)) {}

  // A buffer of `size` bytes whose contents are unspecified (to be overwritten).
  std::string take(size_t size) {
    std::string buffer = shelf_->take(size);
    buffer.resize(size);  // zeroes only what it grows by
    return buffer;
  }

  // `bytes`, immutable and shared, back in this pool when the last owner lets go.
  std::shared_ptr<const std::string> share(std::string bytes) {
    return std::shared_ptr<const std::string>(new std::string(std::move(bytes)),
                                              [shelf = shelf_](std::string* buffer) {
                                                shelf->giveBack(std::move(*buffer));
                                                delete buffer;
                                              });
  }

  // The bytes of the buffers waiting.
  size_t waitingBytes() const { return shelf_->waitingBytes(); }

 private:
  class Shelf {
   public:
    explicit Shelf(size_t keepBytes) : keepBytes_(keepBytes) {}

    // The smallest buffer waiting with room for `size` bytes and at most a quarter more; else
    // none (a new one).
    std::string take(size_t size) {
      MutexLock lock(mutex_);
      const auto fits = bySize_.lower_bound(size);
      if (fits == bySize_.end() || fits->first > size + size / 4) return {};
      std::string buffer = std::move(fits->second->buffer);
      forgetLocked(fits);
      return buffer;
    }

    // Keeps `buffer`, freeing the buffers that came back longest ago until all fit: the shelf
    // follows what is read now (after small files, large ones).
    void giveBack(std::string buffer) {
      const size_t room = buffer.capacity();
      if (room > keepBytes_) return;
      MutexLock lock(mutex_);
      while (waitingBytes_ + room > keepBytes_) forgetLocked(order_.front().index);
      order_.push_back(Entry{std::move(buffer), {}});
      order_.back().index = bySize_.emplace(room, std::prev(order_.end()));
      waitingBytes_ += room;
    }

    size_t waitingBytes() const {
      MutexLock lock(mutex_);
      return waitingBytes_;
    }

   private:
    struct Entry;
    using Order = std::list<Entry>;                         // oldest first
    using BySize = std::multimap<size_t, Order::iterator>;  // by capacity
    struct Entry {
      std::string buffer;
      BySize::iterator index;
    };

    void forgetLocked(BySize::iterator entry) GRANARY_REQUIRES(mutex_) {
      waitingBytes_ -= entry->first;
      order_.erase(entry->second);
      bySize_.erase(entry);
    }

    const size_t keepBytes_;
    mutable Mutex mutex_;
    Order order_ GRANARY_GUARDED_BY(mutex_);
    BySize bySize_ GRANARY_GUARDED_BY(mutex_);
    size_t waitingBytes_ GRANARY_GUARDED_BY(mutex_) = 0;
  };

  std::shared_ptr<Shelf> shelf_;
};

}  // namespace granary::cache
