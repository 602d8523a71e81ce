// A token bucket on bytes: the limit on origin bandwidth of a dataset (Dataset
// spec.cache.bandwidthLimit) and of a node. acquire() reserves its bytes at once and sleeps, on
// the injected Clock, until the bucket has paid for them, so concurrent fetchers share the rate
// fairly and none holds a lock while waiting.
//
// The guarantee: over any interval of length T, the bytes acquire() lets pass are at most
// max(burst, the largest request) + rate × T. The bucket holds at most `burst` bytes and starts
// full; a new rate keeps what it holds (up to the new burst) rather than refilling it. A request
// larger than the burst passes once the bucket has paid for all of it. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>

#include "common/clock.h"
#include "common/thread_annotations.h"

namespace granary::cache {

class BandwidthLimiter {
 public:
  // The default burst: a quarter of a second's worth. Small enough that the rate holds over a
  // few seconds (at most 1.125 × the rate over 2 s); large enough that one fetcher whose
  // transfers take up to 250 ms still reaches the rate, since the bucket refills while it
  // transfers.
  static constexpr std::chrono::milliseconds kDefaultBurst{250};

  // `bytesPerSecond` 0 means unlimited. `burstBytes` is how much may pass at once after a pause;
  // 0: kDefaultBurst's worth (at least one byte).
  BandwidthLimiter(Clock& clock, int64_t bytesPerSecond, int64_t burstBytes = 0);

  // Waits until `bytes` may pass. False when `stop` ended the wait (the bytes stay reserved:
  // the caller was going to send them).
  bool acquire(int64_t bytes, std::stop_token stop = {});
  // acquire() in two steps: reserves `bytes` and returns when the bucket will have paid for them,
  // or nullopt when they may pass now. The caller sleeps until then (Clock::sleepUntil).
  std::optional<Clock::MonoTime> reserve(int64_t bytes);

  // A new rate and burst (as in the constructor). What the bucket holds carries over, up to
  // the new burst; what it owes is paid at the new rate.
  void setRate(int64_t bytesPerSecond, int64_t burstBytes = 0);
  int64_t rate() const;
  int64_t burst() const;

 private:
  void setRateLocked(int64_t bytesPerSecond, int64_t burstBytes) GRANARY_REQUIRES(mutex_);

  Clock& clock_;
  mutable Mutex mutex_;
  double rate_ GRANARY_GUARDED_BY(mutex_) = 0;  // bytes per second; 0 unlimited
  double burst_ GRANARY_GUARDED_BY(mutex_) = 0;
  double tokens_ GRANARY_GUARDED_BY(mutex_) = 0;  // may go negative: reserved, not yet paid off
  Clock::MonoTime updated_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::cache
