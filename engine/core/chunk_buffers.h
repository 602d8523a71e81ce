// Chunk-sized buffers used again once their last reader lets go. A chunk fetched from a peer or
// the origin is up to 16 MiB: new memory for each costs page faults, the kernel zeroing every
// page and std::string zeroing it again (a fifth of a receiving node's CPU at the wire's speed).
// A buffer given out by share() comes back when its last owner drops it; take() hands one out
// again, its bytes left as they were (none zeroed when it has the size asked for). At most `keep`
// buffers of at least kMinBytes wait; smaller ones and any beyond are freed.
//
// Thread-safety: every method may be called from any thread; shared buffers may outlive the pool.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/thread_annotations.h"

namespace granary::cache {

class ChunkBuffers {
 public:
  static constexpr size_t kMinBytes = size_t{1} << 20;

  explicit ChunkBuffers(size_t keep) : shelf_(std::make_shared<Shelf>(keep)) {}

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

  size_t waiting() const { return shelf_->waiting(); }

 private:
  class Shelf {
   public:
    explicit Shelf(size_t keep) : keep_(keep) {}

    // One of `size` bytes if any waits, else one with room for them, else the last one back.
    std::string take(size_t size) {
      MutexLock lock(mutex_);
      if (buffers_.empty()) return {};
      size_t best = buffers_.size() - 1;
      for (size_t i = 0; i < buffers_.size(); ++i) {
        if (buffers_[i].size() == size) {
          best = i;
          break;
        }
        if (buffers_[i].capacity() >= size) best = i;
      }
      std::string buffer = std::move(buffers_[best]);
      buffers_.erase(buffers_.begin() + static_cast<std::ptrdiff_t>(best));
      return buffer;
    }

    void giveBack(std::string buffer) {
      if (buffer.capacity() < kMinBytes) return;
      MutexLock lock(mutex_);
      if (buffers_.size() < keep_) buffers_.push_back(std::move(buffer));
    }

    size_t waiting() const {
      MutexLock lock(mutex_);
      return buffers_.size();
    }

   private:
    const size_t keep_;
    mutable Mutex mutex_;
    std::vector<std::string> buffers_ GRANARY_GUARDED_BY(mutex_);
  };

  std::shared_ptr<Shelf> shelf_;
};

}  // namespace granary::cache
