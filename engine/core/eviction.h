// What stays in a dataset's cache when it is full. Two policies behind one small interface:
//  - Pin: admit until full, then admit nothing and evict nothing while the dataset is in use.
//    Under per-epoch shuffled reads this is optimal: with room for half the dataset, half the
//    reads hit, every epoch.
//  - LRU: admit everything, evicting the least recently used; for shared scratch data, where
//    recency predicts reuse. Under shuffled epochs it thrashes.
// Pure: ids and sizes in, decisions out; the chunk store carries them out. Not thread-safe:
// one owner per dataset.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace granary::cache {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  // A chunk of `size` bytes was fetched. Returns whether to keep it, and fills `evict` with the
  // chunks to drop first to make room (only when it returns true).
  virtual bool admit(const std::string& id, int64_t size, std::vector<std::string>& evict) = 0;
  // A cached chunk was read.
  virtual void touch(const std::string& id) = 0;
  // A chunk left the cache for another reason (purge, damage).
  virtual void forget(const std::string& id) = 0;
  // The disk holds less than the quota promised (it filled first): the chunks to drop to free
  // at least `bytes`, never `keep`, already forgotten. LRU gives up its least recently used;
  // Pin gives up nothing.
  virtual std::vector<std::string> shrink(int64_t bytes, const std::string& keep) = 0;

  // Whether the chunk is admitted (and not evicted since).
  virtual bool holds(const std::string& id) const = 0;
  virtual int64_t usedBytes() const = 0;
  int64_t capacityBytes() const { return capacity_; }

 protected:
  explicit EvictionPolicy(int64_t capacity) : capacity_(capacity) {}
  int64_t capacity_;
};

std::unique_ptr<EvictionPolicy> makePinPolicy(int64_t capacityBytes);
std::unique_ptr<EvictionPolicy> makeLruPolicy(int64_t capacityBytes);

}  // namespace granary::cache
