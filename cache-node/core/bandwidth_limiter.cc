#include "cache-node/core/bandwidth_limiter.h"

#include <algorithm>

namespace granary::cache {

BandwidthLimiter::BandwidthLimiter(Clock& clock, int64_t bytesPerSecond, int64_t burstBytes)
    : clock_(clock), updated_(clock.monoNow()) {
  setRate(bytesPerSecond, burstBytes);
}

void BandwidthLimiter::setRate(int64_t bytesPerSecond, int64_t burstBytes) {
  std::lock_guard lock(mutex_);
  rate_ = static_cast<double>(std::max<int64_t>(0, bytesPerSecond));
  burst_ = static_cast<double>(burstBytes > 0 ? burstBytes : std::max<int64_t>(1, bytesPerSecond));
  tokens_ = burst_;
  updated_ = clock_.monoNow();
}

int64_t BandwidthLimiter::rate() const {
  std::lock_guard lock(mutex_);
  return static_cast<int64_t>(rate_);
}

bool BandwidthLimiter::acquire(int64_t bytes, std::stop_token stop) {
  Clock::MonoTime until;
  {
    std::lock_guard lock(mutex_);
    if (rate_ <= 0 || bytes <= 0) return true;
    const auto now = clock_.monoNow();
    tokens_ =
        std::min(burst_, tokens_ + std::chrono::duration<double>(now - updated_).count() * rate_);
    updated_ = now;
    tokens_ -= static_cast<double>(bytes);
    if (tokens_ >= 0) return true;
    until = now + std::chrono::duration_cast<Clock::Duration>(
                      std::chrono::duration<double>(-tokens_ / rate_));
  }
  return clock_.sleepUntil(until, std::move(stop));
}

}  // namespace granary::cache
