#include "common/kube/work_queue.h"

#include <algorithm>
#include <cmath>

namespace granary::kube {

WorkQueue::WorkQueue(Clock& clock, RateLimitOptions options)
    : clock_(clock),
      options_(options),
      tokens_(options.burst),
      tokensAt_(clock.monoNow()),
      delayThread_([this](std::stop_token stop) { delayLoop(stop); }) {}

WorkQueue::~WorkQueue() {
  shutDown();
  delayThread_.request_stop();
  {
    MutexLock lock(mutex_);
    wake_.request_stop();
  }
  delayThread_.join();
}

void WorkQueue::addLocked(const std::string& key) {
  if (shuttingDown_ || dirty_.count(key)) return;
  dirty_.insert(key);
  readySince_.emplace(key, clock_.monoNow());
  if (processing_.count(key)) return;  // re-queued by done()
  queue_.push_back(key);
  changed_.notify_one();
}

void WorkQueue::add(const std::string& key) {
  MutexLock lock(mutex_);
  addLocked(key);
}

void WorkQueue::addAfter(const std::string& key, Clock::Duration delay) {
  if (delay <= Clock::Duration::zero()) return add(key);
  MutexLock lock(mutex_);
  if (shuttingDown_) return;
  const auto due = clock_.monoNow() + delay;
  const auto it = waiting_.find(key);
  if (it != waiting_.end()) {
    if (it->second <= due) return;
    dueOrder_.erase({it->second, key});
  }
  waiting_[key] = due;
  dueOrder_.emplace(due, key);
  // The delay thread sleeps until the earliest key: only a new earliest one wakes it.
  if (dueOrder_.begin()->second == key) wake_.request_stop();
}

Clock::Duration WorkQueue::rateLimitDelayLocked(const std::string& key) {
  const int failures = failures_[key]++;
  const double perKey = std::min(
      static_cast<double>(options_.baseDelay.count()) * std::pow(2.0, std::min(failures, 62)),
      static_cast<double>(options_.maxDelay.count()));

  const auto now = clock_.monoNow();
  const double elapsed = std::chrono::duration<double>(now - tokensAt_).count();
  tokens_ = std::min(static_cast<double>(options_.burst), tokens_ + elapsed * options_.qps);
  tokensAt_ = now;
  tokens_ -= 1;  // reserve a token; a negative balance is a wait
  const double bucketSeconds = tokens_ >= 0 ? 0 : -tokens_ / options_.qps;

  const auto perKeyDelay = std::chrono::duration<double, std::milli>(perKey);
  const auto bucketDelay = std::chrono::duration<double>(bucketSeconds);
  return std::chrono::duration_cast<Clock::Duration>(
      std::max<std::chrono::duration<double>>(perKeyDelay, bucketDelay));
}

void WorkQueue::addRateLimited(const std::string& key) {
  Clock::Duration delay;
  {
    MutexLock lock(mutex_);
    if (shuttingDown_) return;
    delay = rateLimitDelayLocked(key);
  }
  addAfter(key, delay);
}

void WorkQueue::forget(const std::string& key) {
  MutexLock lock(mutex_);
  failures_.erase(key);
}

int WorkQueue::failures(const std::string& key) const {
  MutexLock lock(mutex_);
  const auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

std::optional<WorkQueue::Item> WorkQueue::get() {
  MutexLock lock(mutex_);
  changed_.wait(lock,
                [this]() GRANARY_REQUIRES(mutex_) { return !queue_.empty() || shuttingDown_; });
  if (queue_.empty()) return std::nullopt;
  Item item{std::move(queue_.front()), {}};
  queue_.pop_front();
  processing_.insert(item.key);
  dirty_.erase(item.key);
  if (const auto it = readySince_.find(item.key); it != readySince_.end()) {
    item.waited = clock_.monoNow() - it->second;
    readySince_.erase(it);
  }
  return item;
}

void WorkQueue::done(const std::string& key) {
  MutexLock lock(mutex_);
  processing_.erase(key);
  if (dirty_.count(key)) {
    queue_.push_back(key);
    changed_.notify_one();
  }
  changed_.notify_all();  // shutDownAndWait watches processing_
}

void WorkQueue::shutDown() {
  MutexLock lock(mutex_);
  shuttingDown_ = true;
  waiting_.clear();
  dueOrder_.clear();
  changed_.notify_all();
}

void WorkQueue::shutDownAndWait() {
  shutDown();
  MutexLock lock(mutex_);
  changed_.wait(lock, [this]() GRANARY_REQUIRES(mutex_) { return processing_.empty(); });
}

size_t WorkQueue::length() const {
  MutexLock lock(mutex_);
  return queue_.size();
}

size_t WorkQueue::delayed() const {
  MutexLock lock(mutex_);
  return waiting_.size();
}

bool WorkQueue::shuttingDown() const {
  MutexLock lock(mutex_);
  return shuttingDown_;
}

void WorkQueue::delayLoop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    std::optional<Clock::MonoTime> next;
    std::stop_token wake;
    {
      MutexLock lock(mutex_);
      const auto now = clock_.monoNow();
      while (!dueOrder_.empty() && dueOrder_.begin()->first <= now) {
        auto node = dueOrder_.extract(dueOrder_.begin());
        waiting_.erase(node.value().second);
        addLocked(node.value().second);
      }
      if (!dueOrder_.empty()) next = dueOrder_.begin()->first;
      if (wake_.stop_requested()) wake_ = std::stop_source();
      wake = wake_.get_token();
    }
    // Sleep until the next key is due, a new key arrives (wake), or the queue stops.
    std::stop_source either;
    std::stop_callback onStop(stop, [&either] { either.request_stop(); });
    std::stop_callback onWake(wake, [&either] { either.request_stop(); });
    const auto until = next ? *next : clock_.monoNow() + std::chrono::hours(24);
    clock_.sleepUntil(until, either.get_token());
  }
}

}  // namespace granary::kube
