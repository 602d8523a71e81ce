#include "common/clock.h"

#include <condition_variable>
#include <mutex>

namespace granary {
namespace {

class RealClock final : public Clock {
 public:
  WallTime wallNow() const override { return std::chrono::system_clock::now(); }
  MonoTime monoNow() const override { return std::chrono::steady_clock::now(); }

  bool sleepUntil(MonoTime deadline, std::stop_token stop) override {
    std::mutex mutex;
    std::condition_variable_any wake;
    std::unique_lock lock(mutex);
    // Nothing notifies `wake`: only the deadline or a stop request ends the wait.
    (void)wake.wait_until(lock, stop, deadline, [] { return false; });
    return !stop.stop_requested();
  }
};

}  // namespace

Clock& realClock() {
  static RealClock clock;
  return clock;
}

}  // namespace granary
