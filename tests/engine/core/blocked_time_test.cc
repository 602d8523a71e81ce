#include "engine/core/blocked_time.h"

#include <gtest/gtest.h>

namespace granary::cache {
namespace {

using namespace std::chrono_literals;
const BlockedTime::Time t0{};

TEST(BlockedTime, ConcurrentWaitsCountOnce) {
  BlockedTime blocked;
  EXPECT_EQ(blocked.add(t0 + 0ms, t0 + 100ms), 100ms);
  EXPECT_EQ(blocked.add(t0 + 50ms, t0 + 150ms), 50ms) << "overlaps the first by half";
  EXPECT_EQ(blocked.add(t0 + 20ms, t0 + 80ms), 0ms) << "inside what is covered";
  EXPECT_EQ(blocked.add(t0 + 200ms, t0 + 300ms), 100ms) << "apart";
  EXPECT_EQ(blocked.total(), 250ms);
}

TEST(BlockedTime, AnIntervalThatEndsLaterButStartedEarlierFillsTheGaps) {
  BlockedTime blocked;
  EXPECT_EQ(blocked.add(t0 + 20ms, t0 + 30ms), 10ms);
  EXPECT_EQ(blocked.add(t0 + 50ms, t0 + 60ms), 10ms);
  EXPECT_EQ(blocked.add(t0 + 0ms, t0 + 100ms), 80ms) << "the union is [0, 100)";
  EXPECT_EQ(blocked.total(), 100ms);
  EXPECT_EQ(blocked.add(t0 + 100ms, t0 + 110ms), 10ms) << "touching is not overlapping";
}

TEST(BlockedTime, UncoveredIsWhatAddWouldReturnWithoutAddingIt) {
  BlockedTime blocked;
  blocked.add(t0 + 20ms, t0 + 30ms);
  blocked.add(t0 + 50ms, t0 + 60ms);
  EXPECT_EQ(blocked.uncovered(t0 + 0ms, t0 + 100ms), 80ms);
  EXPECT_EQ(blocked.uncovered(t0 + 25ms, t0 + 55ms), 20ms) << "half of each interval is covered";
  EXPECT_EQ(blocked.uncovered(t0 + 20ms, t0 + 30ms), 0ms);
  EXPECT_EQ(blocked.uncovered(t0 + 60ms, t0 + 60ms), 0ms);
  EXPECT_EQ(blocked.total(), 20ms) << "nothing was added";
  EXPECT_EQ(blocked.add(t0 + 0ms, t0 + 100ms), 80ms);
}

TEST(BlockedTime, NothingForAnEmptyInterval) {
  BlockedTime blocked;
  EXPECT_EQ(blocked.add(t0 + 10ms, t0 + 10ms), 0ms);
  EXPECT_EQ(blocked.add(t0 + 10ms, t0 + 5ms), 0ms);
  EXPECT_EQ(blocked.total(), 0ms);
}

TEST(BlockedTime, ForgetsWhatEndedBeyondTheHorizon) {
  BlockedTime blocked;
  blocked.add(t0 + 0ms, t0 + 100ms);
  blocked.add(t0 + BlockedTime::kHorizon + 1s, t0 + BlockedTime::kHorizon + 2s);
  // A read that waited since the start is counted whole past what was forgotten.
  EXPECT_EQ(blocked.add(t0 + 0ms, t0 + 50ms), 50ms);
}

}  // namespace
}  // namespace granary::cache
