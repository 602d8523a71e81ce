#include "engine/core/bandwidth_limiter.h"

#include <algorithm>

namespace granary::cache {

BandwidthLimiter::BandwidthLimiter(Clock& clock, int64_t bytesPerSecond, int64_t burstBytes)
    : clock_(clock), updated_(clock.monoNow()) {
  MutexLock lock(mutex_);
  setRateLocked(bytesPerSecond, burstBytes);
  tokens_ = burst_;
}

void BandwidthLimiter::setRate(int64_t bytesPerSecond, int64_t burstBytes) {
  MutexLock lock(mutex_);
  // Settle the bucket at the old rate first.
  const auto now = clock_.monoNow();
  if (rate_ > 0) {
    tokens_ =
        std::min(burst_, tokens_ + std::chrono::duration<double>(now - updated_).count() * rate_);
  }
  updated_ = now;
  const bool wasUnlimited = rate_ <= 0;
  setRateLocked(bytesPerSecond, burstBytes);
  tokens_ = wasUnlimited ? burst_ : std::min(tokens_, burst_);
}

void BandwidthLimiter::setRateLocked(int64_t bytesPerSecond, int64_t burstBytes) {
  rate_ = static_cast<double>(std::max<int64_t>(0, bytesPerSecond));
  burst_ = burstBytes > 0
               ? static_cast<double>(burstBytes)
               : std::max(1.0, rate_ * std::chrono::duration<double>(kDefaultBurst).count());
}

int64_t BandwidthLimiter::rate() const {
  MutexLock lock(mutex_);
  return static_cast<int64_t>(rate_);
}

int64_t BandwidthLimiter::burst() const {
  MutexLock lock(mutex_);
  return static_cast<int64_t>(burst_);
}

bool BandwidthLimiter::acquire(int64_t bytes, std::stop_token stop) {
  const auto until = reserve(bytes);
  return !until || clock_.sleepUntil(*until, std::move(stop));
}

std::optional<Clock::MonoTime> BandwidthLimiter::reserve(int64_t bytes) {
  MutexLock lock(mutex_);
  if (rate_ <= 0 || bytes <= 0) return std::nullopt;
  const auto now = clock_.monoNow();
  tokens_ =
      std::min(burst_, tokens_ + std::chrono::duration<double>(now - updated_).count() * rate_);
  updated_ = now;
  tokens_ -= static_cast<double>(bytes);
  if (tokens_ >= 0) return std::nullopt;
  return now + std::chrono::duration_cast<Clock::Duration>(
                   std::chrono::duration<double>(-tokens_ / rate_));
}

}  // namespace granary::cache
