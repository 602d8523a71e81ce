// Data-starved time is judged per interval: GPUs below half busy while the pod's readers were
// blocked for a tenth of it or more; a pod is judged from its second interval on.
#include "engine/core/data_starvation.h"

#include <gtest/gtest.h>

namespace granary::cache {
namespace {

using namespace std::chrono_literals;

TEST(StarvationMeterTest, IdleGpusWithWaitingReadersAreStarved) {
  StarvationMeter meter;
  EXPECT_TRUE(meter.observe({{"ml/w0", {0.1, 0s}}}, 1s).empty()) << "first seen: no verdict";
  // w0: idle GPUs, readers blocked 400 ms of the second: starved.
  // w1: busy GPUs while waiting (it overlaps loading and compute): not starved.
  // w2: idle GPUs, readers waited only 50 ms: idle for another reason, not starved.
  auto verdicts = meter.observe({{"ml/w0", {0.1, 400ms}}, {"ml/w1", {0.9, 900ms}}}, 1s);
  EXPECT_DOUBLE_EQ(verdicts.at("ml/w0"), 1.0);
  EXPECT_EQ(verdicts.count("ml/w1"), 0u) << "w1 is new in this interval";
  verdicts =
      meter.observe({{"ml/w0", {0.1, 450ms}}, {"ml/w1", {0.9, 1800ms}}, {"ml/w2", {0.0, 0ms}}}, 1s);
  EXPECT_DOUBLE_EQ(verdicts.at("ml/w0"), 0.0) << "waited 50 ms of the second";
  EXPECT_DOUBLE_EQ(verdicts.at("ml/w1"), 0.0);
  verdicts = meter.observe({{"ml/w0", {0.49, 650ms}}, {"ml/w2", {0.0, 100ms}}}, 2s);
  EXPECT_DOUBLE_EQ(verdicts.at("ml/w0"), 2.0) << "the whole interval, 200 ms being its tenth";
  EXPECT_DOUBLE_EQ(verdicts.at("ml/w2"), 0.0) << "100 ms is less than a tenth of 2 s";
  EXPECT_EQ(verdicts.count("ml/w1"), 0u) << "a pod no longer given is forgotten";
}

TEST(StarvationMeterTest, ThresholdsAreTheCallers) {
  StarvationMeter meter({.gpuIdleBelow = 0.2, .waitShareAtLeast = 0.5});
  meter.observe({{"p", {0.1, 0ms}}}, 1s);
  EXPECT_DOUBLE_EQ(meter.observe({{"p", {0.1, 400ms}}}, 1s).at("p"), 0.0);
  EXPECT_DOUBLE_EQ(meter.observe({{"p", {0.1, 900ms}}}, 1s).at("p"), 1.0);
  EXPECT_DOUBLE_EQ(meter.observe({{"p", {0.3, 1500ms}}}, 1s).at("p"), 0.0);
}

}  // namespace
}  // namespace granary::cache
