#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "engine/core/bandwidth_limiter.h"
#include "engine/core/single_flight.h"
#include "tests/support/fake_clock.h"

namespace granary::cache {
namespace {

using namespace std::chrono_literals;
using granary::testing::FakeClock;

TEST(BandwidthLimiter, BurstPassesThenTheRateHolds) {
  FakeClock clock;
  BandwidthLimiter limiter(clock, 1 << 20, 1 << 20);  // 1 MiB/s, burst 1 MiB
  EXPECT_TRUE(limiter.acquire(1 << 20));              // the burst: no wait
  std::atomic<bool> passed{false};
  std::thread fetcher([&] {
    limiter.acquire(512 << 10);
    passed = true;
  });
  clock.waitForSleepers(1);
  clock.advance(499ms);
  EXPECT_FALSE(passed);
  clock.advance(1ms);
  fetcher.join();
  EXPECT_TRUE(passed);
}

TEST(BandwidthLimiter, ReserveSaysWhenTheBytesArePaidFor) {
  FakeClock clock;
  BandwidthLimiter limiter(clock, 1 << 20, 1 << 20);  // 1 MiB/s, burst 1 MiB
  EXPECT_FALSE(limiter.reserve(1 << 20)) << "the burst passes now";
  const auto start = clock.monoNow();
  EXPECT_EQ(limiter.reserve(512 << 10), start + 500ms);
  EXPECT_EQ(limiter.reserve(512 << 10), start + 1s) << "the second waits behind the first";
  EXPECT_FALSE(BandwidthLimiter(clock, 0).reserve(1 << 30)) << "unlimited";
}

TEST(BandwidthLimiter, TheDefaultBurstIsAQuarterOfASecond) {
  FakeClock clock;
  BandwidthLimiter limiter(clock, 4 << 20);  // 4 MiB/s
  EXPECT_EQ(limiter.burst(), 1 << 20);
  EXPECT_TRUE(limiter.acquire(1 << 20));  // the burst: no wait
  std::atomic<bool> passed{false};
  std::thread fetcher([&] {
    limiter.acquire(1 << 20);
    passed = true;
  });
  clock.waitForSleepers(1);
  clock.advance(249ms);
  EXPECT_FALSE(passed);
  clock.advance(1ms);
  fetcher.join();
  EXPECT_TRUE(passed);
}

TEST(BandwidthLimiter, ANewRateDoesNotRefillTheBucket) {
  FakeClock clock;
  BandwidthLimiter limiter(clock, 1 << 20);
  ASSERT_TRUE(limiter.acquire(limiter.burst()));  // empty
  limiter.setRate(2 << 20);                       // e.g. the Dataset's limit was raised
  std::atomic<bool> passed{false};
  std::thread fetcher([&] {
    limiter.acquire(1 << 10);
    passed = true;
  });
  clock.waitForSleepers(1);
  EXPECT_FALSE(passed) << "the bucket was empty and stays so";
  clock.advance(1ms);  // 2 KiB at the new rate
  fetcher.join();
  EXPECT_TRUE(passed);
}

// Time that jumps from one waiting deadline to the next, once every thread that is due has
// woken and either waits again or is done: when each acquire() passes, exactly.
class SteppedClock final : public Clock {
 public:
  WallTime wallNow() const override { return {}; }
  MonoTime monoNow() const override {
    std::lock_guard lock(mutex_);
    return now_;
  }
  bool sleepUntil(MonoTime deadline, std::stop_token) override {
    std::unique_lock lock(mutex_);
    const auto waiting = deadlines_.insert(deadline);
    changed_.notify_all();
    changed_.wait(lock, [&] { return now_ >= deadline; });
    deadlines_.erase(waiting);
    changed_.notify_all();
    return true;
  }
  // Once `running()` threads wait and none is due, moves to the earliest deadline. False when
  // no thread runs any more.
  bool step(const std::function<int()>& running) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] {
      return static_cast<int>(deadlines_.size()) == running() &&
             (deadlines_.empty() || *deadlines_.begin() > now_);
    });
    if (deadlines_.empty()) return false;
    now_ = *deadlines_.begin();
    changed_.notify_all();
    return true;
  }
  void changed() { changed_.notify_all(); }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  MonoTime now_{std::chrono::hours(1)};
  std::multiset<MonoTime> deadlines_;
};

// Fetchers that always want more: in every second, what passes is at most the burst plus a
// second's worth, and the rate is reached.
TEST(BandwidthLimiter, TheRateHoldsOverEverySecond) {
  SteppedClock clock;
  constexpr int64_t kRate = 1 << 20, kRequest = 64 << 10;
  BandwidthLimiter limiter(clock, kRate);
  const auto start = clock.monoNow();
  std::mutex mutex;
  std::vector<Clock::MonoTime> passed;
  std::atomic<int> running{4};
  std::vector<std::thread> fetchers;
  for (int i = 0; i < 4; ++i) {
    fetchers.emplace_back([&] {
      while (clock.monoNow() - start < 4s) {
        limiter.acquire(kRequest);
        std::lock_guard lock(mutex);
        passed.push_back(clock.monoNow());
      }
      --running;
      clock.changed();
    });
  }
  while (clock.step([&] { return running.load(); })) {
  }
  for (auto& f : fetchers) f.join();
  for (const auto& when : passed) {
    int64_t second = 0;  // what passed in the second up to `when`
    for (const auto& other : passed)
      if (other <= when && when - other < 1s) second += kRequest;
    EXPECT_LE(second, limiter.burst() + kRate)
        << "in the second before " << (when - start) / 1ms << " ms";
  }
  EXPECT_GE(static_cast<int64_t>(passed.size()) * kRequest, 4 * kRate) << "the rate is reached";
}

TEST(BandwidthLimiter, ConcurrentFetchersShareTheRate) {
  FakeClock clock;
  BandwidthLimiter limiter(clock, 100, 100);
  ASSERT_TRUE(limiter.acquire(100));  // empty the bucket
  std::vector<std::thread> fetchers;
  for (int i = 0; i < 4; ++i) fetchers.emplace_back([&] { limiter.acquire(100); });
  clock.waitForSleepers(4);
  // 400 more bytes at 100 B/s: one fetcher passes each second.
  clock.advance(3999ms);
  while (clock.sleepers() > 1) std::this_thread::yield();
  EXPECT_EQ(clock.sleepers(), 1) << "the last reservation pays off at 4 s, the others before";
  clock.advance(1ms);
  for (auto& f : fetchers) f.join();
}

TEST(BandwidthLimiter, UnlimitedAndStop) {
  FakeClock clock;
  BandwidthLimiter unlimited(clock, 0);
  EXPECT_TRUE(unlimited.acquire(int64_t{1} << 40));
  BandwidthLimiter slow(clock, 1, 1);
  ASSERT_TRUE(slow.acquire(1));
  std::stop_source stop;
  std::atomic<bool> result{true};
  std::thread fetcher([&] { result = slow.acquire(1000, stop.get_token()); });
  clock.waitForSleepers(1);
  stop.request_stop();
  fetcher.join();
  EXPECT_FALSE(result);
}

TEST(SingleFlight, ConcurrentCallersShareOneFetch) {
  SingleFlight<std::string> flight;
  std::atomic<int> fetches{0};
  std::mutex gate;
  gate.lock();  // holds the first fetch until every caller has joined it
  std::vector<std::thread> callers;
  std::vector<std::string> results(8);
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&, i] {
      auto r = flight.run("ml/ds/1\\0a.bin\\03", [&]() -> Result<std::string> {
        ++fetches;
        std::lock_guard wait(gate);
        return std::string("chunk bytes");
      });
      results[i] = r.isOk() ? *r : r.status().toString();
    });
  }
  while (flight.waiters("ml/ds/1\\0a.bin\\03") < 8) std::this_thread::yield();
  gate.unlock();
  for (auto& c : callers) c.join();
  EXPECT_EQ(fetches.load(), 1);
  for (const auto& r : results) EXPECT_EQ(r, "chunk bytes");
  EXPECT_EQ(flight.inFlight(), 0u);

  // Finished: the next call fetches again; failures are shared like results.
  auto again = flight.run("ml/ds/1\\0a.bin\\03", [&]() -> Result<std::string> {
    ++fetches;
    return unavailable("origin down");
  });
  EXPECT_EQ(fetches.load(), 2);
  EXPECT_EQ(again.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace granary::cache
