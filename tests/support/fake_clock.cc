#include "tests/support/fake_clock.h"

namespace granary::testing {

FakeClock::FakeClock()
    : wall_(std::chrono::sys_days(std::chrono::year(2026) / 1 / 1)),
      mono_(MonoTime(std::chrono::hours(1000))) {}

Clock::WallTime FakeClock::wallNow() const {
  std::lock_guard lock(mutex_);
  return wall_;
}

Clock::MonoTime FakeClock::monoNow() const {
  std::lock_guard lock(mutex_);
  return mono_;
}

bool FakeClock::sleepUntil(MonoTime deadline, std::stop_token stop) {
  std::unique_lock lock(mutex_);
  ++sleepers_;
  changed_.notify_all();
  const bool reached = changed_.wait(lock, stop, [&] { return mono_ >= deadline; });
  --sleepers_;
  changed_.notify_all();
  return reached;
}

void FakeClock::advance(Duration duration) {
  std::lock_guard lock(mutex_);
  mono_ += duration;
  wall_ += std::chrono::duration_cast<WallTime::duration>(duration);
  changed_.notify_all();
}

void FakeClock::setWall(WallTime time) {
  std::lock_guard lock(mutex_);
  wall_ = time;
}

void FakeClock::waitForSleepers(int count) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return sleepers_ >= count; });
}

int FakeClock::sleepers() const {
  std::lock_guard lock(mutex_);
  return sleepers_;
}

}  // namespace granary::testing
