#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "cache-node/core/bandwidth_limiter.h"
#include "cache-node/core/single_flight.h"
#include "tests/support/fake_clock.h"

namespace granary::cache {
namespace {

using namespace std::chrono_literals;
using granary::testing::FakeClock;

TEST(BandwidthLimiter, BurstPassesThenTheRateHolds) {
  FakeClock clock;
  BandwidthLimiter limiter(clock, 1 << 20);  // 1 MiB/s, burst 1 MiB
  EXPECT_TRUE(limiter.acquire(1 << 20));     // the burst: no wait
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
