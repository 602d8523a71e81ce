// Bytes per second over a recent window, from counts added as they happen: the warm rate a
// dataset shows. Counts fall into buckets of a fiftieth of the window; the rate is what the
// buckets within the window hold over the time they cover (since the meter started, while that
// is shorter than the window). It is unknown until the meter has watched for `minimumSpan`, so
// that a few chunks fetched in the first milliseconds never read as gigabytes per second.
// Pure: the caller passes the time. Not thread-safe (its owner locks).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "common/clock.h"

namespace granary::cache {

class RateMeter {
 public:
  struct Options {
    // How far back the rate looks. Default 5 s: a few chunks even at low rates, yet recent.
    Clock::Duration window = std::chrono::seconds(5);
    // How long the meter must have watched before it knows a rate. Default 1 s.
    Clock::Duration minimumSpan = std::chrono::seconds(1);
  };

  explicit RateMeter(Clock::MonoTime start) : RateMeter(start, Options()) {}
  RateMeter(Clock::MonoTime start, Options options);

  // Counts `bytes` at `now` (not before the start; times need not be in order within a bucket).
  void add(Clock::MonoTime now, int64_t bytes);
  // Bytes per second over the window ending at `now`; nullopt while the meter has watched for
  // less than minimumSpan.
  std::optional<double> bytesPerSecond(Clock::MonoTime now) const;

 private:
  static constexpr int64_t kBuckets = 50;  // per window
  int64_t bucketOf(Clock::MonoTime time) const;

  Clock::MonoTime start_;
  Options options_;
  Clock::Duration bucket_;
  std::deque<std::pair<int64_t, int64_t>> counts_;  // (bucket, bytes), oldest first
};

}  // namespace granary::cache
