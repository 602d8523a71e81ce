#include "engine/core/rate_meter.h"

#include <algorithm>

namespace granary::cache {

RateMeter::RateMeter(Clock::MonoTime start, Options options)
    : start_(start),
      options_(options),
      bucket_(std::max<Clock::Duration>(Clock::Duration(1), options.window / kBuckets)) {}

int64_t RateMeter::bucketOf(Clock::MonoTime time) const {
  return std::max<int64_t>(0, (time - start_) / bucket_);
}

void RateMeter::add(Clock::MonoTime now, int64_t bytes) {
  if (bytes <= 0) return;
  const int64_t bucket = bucketOf(now);
  auto it = std::find_if(counts_.rbegin(), counts_.rend(),
                         [&](const auto& count) { return count.first <= bucket; });
  if (it != counts_.rend() && it->first == bucket) {
    it->second += bytes;
  } else {
    counts_.insert(it.base(), {bucket, bytes});
  }
  // Buckets that fell out of the window are of no further use.
  while (!counts_.empty() && counts_.front().first <= bucket - kBuckets) counts_.pop_front();
}

std::optional<double> RateMeter::bytesPerSecond(Clock::MonoTime now) const {
  if (now - start_ < options_.minimumSpan) return std::nullopt;
  // The buckets within the window: the current one and those before it, from the meter's start.
  const int64_t first = std::max<int64_t>(0, bucketOf(now) - kBuckets + 1);
  const Clock::Duration covered = (now - start_) - first * bucket_;
  if (covered <= Clock::Duration::zero()) return 0.0;
  int64_t bytes = 0;
  for (const auto& [bucket, count] : counts_)
    if (bucket >= first) bytes += count;
  return static_cast<double>(bytes) / std::chrono::duration<double>(covered).count();
}

}  // namespace granary::cache
