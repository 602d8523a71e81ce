// FakeClock: time that moves only when a test says so.
//
// sleepUntil() blocks until advance() carries monotonic time past the deadline (or the stop
// token fires), so a test steps a component through its timeouts without real sleeps.
// waitForSleepers(n) blocks until n threads are parked in sleepUntil(), which lets a test
// advance time only once the component under test is actually waiting.
#pragma once

#include <condition_variable>
#include <mutex>

#include "common/clock.h"

namespace granary::testing {

class FakeClock final : public Clock {
 public:
  // Starts at 2026-01-01T00:00:00Z wall time and an arbitrary monotonic origin.
  FakeClock();

  WallTime wallNow() const override;
  MonoTime monoNow() const override;
  bool sleepUntil(MonoTime deadline, std::stop_token stop) override;

  // Moves both wall and monotonic time forward and wakes sleepers whose deadline passed.
  void advance(Duration duration);
  // Sets wall time only (e.g. to test timestamp formatting); monotonic time is unchanged.
  void setWall(WallTime time);
  // Blocks until at least `count` threads are inside sleepUntil().
  void waitForSleepers(int count);
  int sleepers() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable_any changed_;
  WallTime wall_;
  MonoTime mono_;
  int sleepers_ = 0;
};

}  // namespace granary::testing
