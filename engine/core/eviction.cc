#include "engine/core/eviction.h"

namespace granary::cache {
namespace {

class PinPolicy final : public EvictionPolicy {
 public:
  explicit PinPolicy(int64_t capacity) : EvictionPolicy(capacity) {}

  bool admit(const std::string& id, int64_t size, std::vector<std::string>& evict) override {
    evict.clear();
    if (sizes_.count(id)) return true;
    if (used_ + size > capacity_) return false;
    sizes_[id] = size;
    used_ += size;
    return true;
  }
  void touch(const std::string&) override {}
  void forget(const std::string& id) override {
    const auto it = sizes_.find(id);
    if (it == sizes_.end()) return;
    used_ -= it->second;
    sizes_.erase(it);
  }
  std::vector<std::string> shrink(int64_t, const std::string&) override { return {}; }
  bool holds(const std::string& id) const override { return sizes_.contains(id); }
  int64_t usedBytes() const override { return used_; }

 private:
  std::unordered_map<std::string, int64_t> sizes_;
  int64_t used_ = 0;
};

class LruPolicy final : public EvictionPolicy {
 public:
  explicit LruPolicy(int64_t capacity) : EvictionPolicy(capacity) {}

  bool admit(const std::string& id, int64_t size, std::vector<std::string>& evict) override {
    evict.clear();
    if (size > capacity_) return false;
    if (entries_.count(id)) {
      touch(id);
      return true;
    }
    while (used_ + size > capacity_ && !order_.empty()) {
      const std::string victim = order_.back();
      evict.push_back(victim);
      forget(victim);
    }
    order_.push_front(id);
    entries_[id] = {order_.begin(), size};
    used_ += size;
    return true;
  }
  void touch(const std::string& id) override {
    const auto it = entries_.find(id);
    if (it == entries_.end()) return;
    order_.splice(order_.begin(), order_, it->second.position);
  }
  void forget(const std::string& id) override {
    const auto it = entries_.find(id);
    if (it == entries_.end()) return;
    used_ -= it->second.size;
    order_.erase(it->second.position);
    entries_.erase(it);
  }
  std::vector<std::string> shrink(int64_t bytes, const std::string& keep) override {
    std::vector<std::string> victims;
    for (auto it = order_.rbegin(); bytes > 0 && it != order_.rend(); ++it) {
      if (*it == keep) continue;
      victims.push_back(*it);
      bytes -= entries_.at(*it).size;
    }
    for (const auto& victim : victims) forget(victim);
    return victims;
  }
  bool holds(const std::string& id) const override { return entries_.contains(id); }
  int64_t usedBytes() const override { return used_; }

 private:
  struct Entry {
    std::list<std::string>::iterator position;
    int64_t size;
  };
  std::list<std::string> order_;  // most recent first
  std::unordered_map<std::string, Entry> entries_;
  int64_t used_ = 0;
};

}  // namespace

std::unique_ptr<EvictionPolicy> makePinPolicy(int64_t capacityBytes) {
  return std::make_unique<PinPolicy>(capacityBytes);
}

std::unique_ptr<EvictionPolicy> makeLruPolicy(int64_t capacityBytes) {
  return std::make_unique<LruPolicy>(capacityBytes);
}

}  // namespace granary::cache
