// The only place granary reads time. Components take a Clock& so tests can substitute
// FakeClock (tests/support/fake_clock.h) and step time by hand instead of sleeping.
//
// Thread-safety: every Clock method may be called from any thread.
#pragma once

#include <chrono>
#include <stop_token>

namespace granary {

class Clock {
 public:
  using WallTime = std::chrono::system_clock::time_point;
  using MonoTime = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::nanoseconds;

  virtual ~Clock() = default;

  // Calendar time, for timestamps shown to people and written to Kubernetes.
  virtual WallTime wallNow() const = 0;
  // Monotonic time, for deadlines, rates and durations.
  virtual MonoTime monoNow() const = 0;
  // Blocks until monoNow() >= deadline or `stop` is requested.
  // Returns true when the deadline passed, false when stopped first.
  virtual bool sleepUntil(MonoTime deadline, std::stop_token stop) = 0;

  bool sleepFor(Duration duration, std::stop_token stop) {
    return sleepUntil(monoNow() + duration, std::move(stop));
  }
};

// The process-wide real clock (system_clock and steady_clock).
Clock& realClock();

}  // namespace granary
