// The wall time during which at least one of a reader's reads was blocked: the union of the
// intervals its reads spent waiting, which concurrent reads (read-ahead, threads) overlap, so
// that it never exceeds the time the reader ran. Intervals are added as their reads end, in any
// order. Pure; not thread-safe (its owner locks).
#pragma once

#include <chrono>
#include <map>

namespace granary::cache {

class BlockedTime {
 public:
  using Time = std::chrono::steady_clock::time_point;
  // Intervals ending this long before the newest one are forgotten: a read blocked for longer
  // is counted whole, without its overlap with the forgotten ones.
  static constexpr std::chrono::minutes kHorizon{10};

  // Adds [start, end); returns the part of it no earlier interval covered.
  std::chrono::nanoseconds add(Time start, Time end);
  std::chrono::nanoseconds total() const { return total_; }
  // The part of [start, end) that no interval added so far covers: what add(start, end) would
  // return, without adding it (a read still blocked, counted up to now).
  std::chrono::nanoseconds uncovered(Time start, Time end) const;

 private:
  std::map<Time, Time> covered_;  // disjoint [start, end), by start
  std::chrono::nanoseconds total_{0};
};

}  // namespace granary::cache
