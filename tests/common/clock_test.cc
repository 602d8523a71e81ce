#include "common/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/support/fake_clock.h"

namespace granary {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

TEST(RealClock, MonotonicTimeDoesNotGoBackwards) {
  Clock& clock = realClock();
  const auto a = clock.monoNow();
  const auto b = clock.monoNow();
  EXPECT_LE(a, b);
}

TEST(RealClock, SleepReturnsTrueWhenDeadlinePassed) {
  Clock& clock = realClock();
  const auto start = clock.monoNow();
  EXPECT_TRUE(clock.sleepFor(2ms, std::stop_token{}));
  EXPECT_GE(clock.monoNow() - start, 2ms);
}

TEST(RealClock, StopRequestEndsSleepEarly) {
  std::stop_source stop;
  std::atomic<bool> result{true};
  std::thread sleeper([&] { result = realClock().sleepFor(1h, stop.get_token()); });
  stop.request_stop();
  sleeper.join();
  EXPECT_FALSE(result);
}

TEST(FakeClock, TimeMovesOnlyWhenAdvanced) {
  FakeClock clock;
  const auto mono = clock.monoNow();
  const auto wall = clock.wallNow();
  EXPECT_EQ(clock.monoNow(), mono);
  clock.advance(5s);
  EXPECT_EQ(clock.monoNow() - mono, 5s);
  EXPECT_EQ(clock.wallNow() - wall, 5s);
}

TEST(FakeClock, SleeperWakesExactlyWhenDeadlinePasses) {
  FakeClock clock;
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    EXPECT_TRUE(clock.sleepFor(10s, std::stop_token{}));
    woke = true;
  });
  clock.waitForSleepers(1);
  clock.advance(9s);
  EXPECT_FALSE(woke);
  EXPECT_EQ(clock.sleepers(), 1);
  clock.advance(1s);
  sleeper.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(clock.sleepers(), 0);
}

TEST(FakeClock, StopWakesSleeperWithFalse) {
  FakeClock clock;
  std::stop_source stop;
  std::atomic<bool> result{true};
  std::thread sleeper([&] { result = clock.sleepFor(1h, stop.get_token()); });
  clock.waitForSleepers(1);
  stop.request_stop();
  sleeper.join();
  EXPECT_FALSE(result);
}

TEST(FakeClock, PastDeadlineReturnsAtOnce) {
  FakeClock clock;
  EXPECT_TRUE(clock.sleepUntil(clock.monoNow() - 1s, std::stop_token{}));
}

}  // namespace
}  // namespace granary
