// A token bucket on bytes: the per-node limit on origin bandwidth (Dataset
// spec.cache.bandwidthLimit). acquire() reserves its bytes at once and sleeps, on the injected
// Clock, only as long as the reservation takes to pay off, so concurrent fetchers share the
// rate fairly and none holds a lock while waiting. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <stop_token>

#include "common/clock.h"

namespace granary::cache {

class BandwidthLimiter {
 public:
  // `bytesPerSecond` 0 means unlimited. `burstBytes` is how much may pass at once after a pause
  // (at least one second's worth is sensible; default: one second's worth).
  BandwidthLimiter(Clock& clock, int64_t bytesPerSecond, int64_t burstBytes = 0);

  // Waits until `bytes` may pass. False when `stop` ended the wait (the bytes stay reserved:
  // the caller was going to send them).
  bool acquire(int64_t bytes, std::stop_token stop = {});

  void setRate(int64_t bytesPerSecond, int64_t burstBytes = 0);
  int64_t rate() const;

 private:
  Clock& clock_;
  mutable std::mutex mutex_;  // guards the bucket
  double rate_;               // bytes per second; 0 unlimited
  double burst_;
  double tokens_;  // may go negative: reserved, not yet paid off
  Clock::MonoTime updated_;
};

}  // namespace granary::cache
