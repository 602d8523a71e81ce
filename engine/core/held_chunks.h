// Whole chunks held in memory after a fetch, for the reads that come after it: a chunk this node
// does not keep on its disk (another node owns it) arrives whole from a peer or the origin, and the
// reads of a file go through it piece by piece (a FUSE read is at most 1 MiB of a 16 MiB chunk).
// Without it each read that came after the fetch ended would bring the whole chunk again. Bounded
// by bytes, least recently used first out; a chunk larger than the bound is never held. A held
// chunk is immutable and shared: whoever still reads it keeps it alive after it leaves. `Chunk` is
// a value whose `bytes` (a shared_ptr to const std::string) are the chunk's, copied cheaply.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/thread_annotations.h"

namespace granary::cache {

template <typename Chunk>
class HeldChunks {
 public:
  // `capacityBytes` 0 holds nothing.
  explicit HeldChunks(int64_t capacityBytes) : capacity_(capacityBytes) {}

  // The chunk held under `key`, now the most recently used; nullopt when none is.
  std::optional<Chunk> find(const std::string& key) {
    MutexLock lock(mutex_);
    const auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->chunk;
  }

  // Holds `chunk` under `key` (replacing what was there), dropping the least recently used
  // until it fits.
  void hold(const std::string& key, Chunk chunk) {
    const auto size = static_cast<int64_t>(chunk.bytes->size());
    if (size > capacity_) return;
    MutexLock lock(mutex_);
    dropLocked(key);
    while (used_ + size > capacity_) dropLocked(order_.back().key);
    order_.push_front(Entry{key, std::move(chunk)});
    index_[key] = order_.begin();
    used_ += size;
  }

  // Forgets `key` (its version changed, or it is kept on disk now).
  void drop(const std::string& key) {
    MutexLock lock(mutex_);
    dropLocked(key);
  }

  int64_t usedBytes() const {
    MutexLock lock(mutex_);
    return used_;
  }

 private:
  struct Entry {
    std::string key;
    Chunk chunk;
  };
  void dropLocked(const std::string& key) GRANARY_REQUIRES(mutex_) {
    const auto it = index_.find(key);
    if (it == index_.end()) return;
    used_ -= static_cast<int64_t>(it->second->chunk.bytes->size());
    order_.erase(it->second);
    index_.erase(it);
  }

  const int64_t capacity_;
  mutable Mutex mutex_;
  std::list<Entry> order_ GRANARY_GUARDED_BY(mutex_);  // most recently used first
  std::map<std::string, typename std::list<Entry>::iterator> index_ GRANARY_GUARDED_BY(mutex_);
  int64_t used_ GRANARY_GUARDED_BY(mutex_) = 0;
};

}  // namespace granary::cache
