#include "engine/core/warm_priorities.h"

#include <utility>

namespace granary::cache {

WarmPriorities::Turn::Turn(Turn&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)), id_(other.id_) {}

WarmPriorities::Turn& WarmPriorities::Turn::operator=(Turn&& other) noexcept {
  if (this != &other) {
    if (owner_ != nullptr) owner_->leave(id_);
    owner_ = std::exchange(other.owner_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

WarmPriorities::Turn::~Turn() {
  if (owner_ != nullptr) owner_->leave(id_);
}

void WarmPriorities::Turn::setPriority(int priority) {
  if (owner_ != nullptr) owner_->set(id_, priority);
}

bool WarmPriorities::Turn::wait(std::stop_token stop) const {
  if (owner_ == nullptr) return !stop.stop_requested();
  WarmPriorities& owner = *owner_;
  MutexLock lock(owner.mutex_);
  return owner.changed_.wait(
      lock, stop, [&]() GRANARY_REQUIRES(owner.mutex_) { return owner.mayGoLocked(id_); });
}

bool WarmPriorities::Turn::mayGo() const {
  if (owner_ == nullptr) return true;
  WarmPriorities& owner = *owner_;
  MutexLock lock(owner.mutex_);
  return owner.mayGoLocked(id_);
}

void WarmPriorities::Turn::waitingForOwnLimit(bool waiting) {
  if (owner_ != nullptr) owner_->addOwnLimitWaits(id_, waiting ? 1 : -1);
}

WarmPriorities::Turn WarmPriorities::enter(int priority) {
  MutexLock lock(mutex_);
  const uint64_t id = nextId_++;
  holders_[id] = {.priority = priority};
  return Turn(this, id);
}

size_t WarmPriorities::holders() const {
  MutexLock lock(mutex_);
  return holders_.size();
}

void WarmPriorities::leave(uint64_t id) {
  {
    MutexLock lock(mutex_);
    holders_.erase(id);
  }
  changed_.notify_all();
}

void WarmPriorities::set(uint64_t id, int priority) {
  {
    MutexLock lock(mutex_);
    holders_[id].priority = priority;
  }
  changed_.notify_all();
}

void WarmPriorities::addOwnLimitWaits(uint64_t id, int change) {
  {
    MutexLock lock(mutex_);
    holders_[id].ownLimitWaits += change;
  }
  changed_.notify_all();
}

bool WarmPriorities::mayGoLocked(uint64_t id) const {
  const auto self = holders_.find(id);
  if (self == holders_.end()) return true;
  for (const auto& [other, holder] : holders_)
    if (holder.priority > self->second.priority && holder.ownLimitWaits == 0) return false;
  return true;
}

}  // namespace granary::cache
