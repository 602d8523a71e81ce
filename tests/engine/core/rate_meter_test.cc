#include "engine/core/rate_meter.h"

#include <gtest/gtest.h>

namespace granary::cache {
namespace {

using namespace std::chrono_literals;

const Clock::MonoTime kStart{std::chrono::hours(1)};

TEST(RateMeter, UnknownForTheFirstSecondSoAnEarlyBurstIsNoSpike) {
  RateMeter meter(kStart);
  meter.add(kStart + 2ms, 64 << 20);  // four chunks fetched at once, at the start
  EXPECT_FALSE(meter.bytesPerSecond(kStart + 3ms).has_value());
  EXPECT_FALSE(meter.bytesPerSecond(kStart + 999ms).has_value());
  ASSERT_TRUE(meter.bytesPerSecond(kStart + 1s).has_value());
  EXPECT_DOUBLE_EQ(*meter.bytesPerSecond(kStart + 1s), 64 << 20);  // over the second watched
  EXPECT_DOUBLE_EQ(*meter.bytesPerSecond(kStart + 2s), 32 << 20);
}

TEST(RateMeter, ASteadyRateReadsAsItself) {
  RateMeter meter(kStart);
  for (int i = 1; i <= 200; ++i) {  // 1 MiB/s for 10 s
    meter.add(kStart + i * 50ms, 50 << 10);
    if (i % 20 != 0 || i < 40) continue;
    const auto rate = meter.bytesPerSecond(kStart + i * 50ms);
    ASSERT_TRUE(rate.has_value());
    EXPECT_NEAR(*rate, 1 << 20, (1 << 20) * 0.03) << "at " << i * 50 << " ms";
  }
}

TEST(RateMeter, OnlyTheLastWindowCounts) {
  RateMeter meter(kStart);
  meter.add(kStart + 100ms, 100 << 20);                                         // long ago
  for (int i = 0; i < 50; ++i) meter.add(kStart + 10s + i * 100ms, 100 << 10);  // 1 MB/s
  EXPECT_NEAR(*meter.bytesPerSecond(kStart + 15s), 1'024'000, 1'024'000 * 0.03);
  EXPECT_DOUBLE_EQ(*meter.bytesPerSecond(kStart + 30s), 0) << "nothing fetched lately";
}

TEST(RateMeter, WindowAndMinimumAreOptions) {
  RateMeter meter(kStart, {.window = 1s, .minimumSpan = 100ms});
  meter.add(kStart + 50ms, 1000);
  EXPECT_FALSE(meter.bytesPerSecond(kStart + 99ms).has_value());
  EXPECT_DOUBLE_EQ(*meter.bytesPerSecond(kStart + 100ms), 10'000);
  EXPECT_DOUBLE_EQ(*meter.bytesPerSecond(kStart + 2s), 0);
}

}  // namespace
}  // namespace granary::cache
