// A rate-limited work queue of keys, with controller-runtime's guarantees:
//  - a key queued several times is processed once (de-duplication);
//  - a key is never handed to two workers at once; a key added while in flight is processed
//    again after done();
//  - addRateLimited delays a key by the larger of its own exponential backoff (5 ms doubling
//    to 1000 s) and a global token bucket (10 per second, bursts of 100);
//  - addAfter delays a key; an earlier delay for the same key wins;
//  - shutDown drains: get() hands out what is queued, then returns nothing.
//
// Delays use the injected Clock, so tests step them with FakeClock. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/thread_annotations.h"

namespace granary::kube {

struct RateLimitOptions {
  // Per-key backoff: base * 2^failures, capped. Defaults 5 ms and 1000 s.
  std::chrono::milliseconds baseDelay{5};
  std::chrono::milliseconds maxDelay{1'000'000};
  // Global token bucket across keys. Defaults 10 per second, burst 100.
  double qps = 10;
  int burst = 100;
};

class WorkQueue {
 public:
  struct Item {
    std::string key;
    Clock::Duration waited;  // from when the key became ready to when get() returned it
  };

  explicit WorkQueue(Clock& clock = realClock(), RateLimitOptions options = {});
  ~WorkQueue();  // shuts down

  void add(const std::string& key);
  void addAfter(const std::string& key, Clock::Duration delay);
  void addRateLimited(const std::string& key);
  // Clears the key's failure count (after a success).
  void forget(const std::string& key);
  int failures(const std::string& key) const;

  // Blocks until a key is ready; nullopt once shut down and drained.
  std::optional<Item> get();
  // Marks a key from get() as finished.
  void done(const std::string& key);

  // Stops accepting keys; get() drains what is queued (delayed keys are dropped).
  void shutDown();
  // shutDown(), then waits until every key handed out is done().
  void shutDownAndWait();

  size_t length() const;   // ready keys
  size_t delayed() const;  // keys waiting for their delay
  bool shuttingDown() const;

 private:
  void addLocked(const std::string& key) GRANARY_REQUIRES(mutex_);
  Clock::Duration rateLimitDelayLocked(const std::string& key) GRANARY_REQUIRES(mutex_);
  void delayLoop(std::stop_token stop);

  Clock& clock_;
  RateLimitOptions options_;

  mutable Mutex mutex_;
  std::condition_variable_any changed_;  // waits on mutex_
  std::deque<std::string> queue_ GRANARY_GUARDED_BY(mutex_);
  // Queued or to be re-queued after done().
  std::set<std::string> dirty_ GRANARY_GUARDED_BY(mutex_);
  // Handed out by get(), not yet done().
  std::set<std::string> processing_ GRANARY_GUARDED_BY(mutex_);
  std::map<std::string, Clock::MonoTime> readySince_ GRANARY_GUARDED_BY(mutex_);
  // Key → when it is due, and the same keys by when they are due (the delay thread takes the
  // earliest without looking at the rest).
  std::map<std::string, Clock::MonoTime> waiting_ GRANARY_GUARDED_BY(mutex_);
  std::set<std::pair<Clock::MonoTime, std::string>> dueOrder_ GRANARY_GUARDED_BY(mutex_);
  std::map<std::string, int> failures_ GRANARY_GUARDED_BY(mutex_);
  double tokens_ GRANARY_GUARDED_BY(mutex_);
  Clock::MonoTime tokensAt_ GRANARY_GUARDED_BY(mutex_);
  bool shuttingDown_ GRANARY_GUARDED_BY(mutex_) = false;
  // Interrupts the delay thread's sleep when an earlier key arrives.
  std::stop_source wake_ GRANARY_GUARDED_BY(mutex_);
  std::jthread delayThread_;
};

}  // namespace granary::kube
