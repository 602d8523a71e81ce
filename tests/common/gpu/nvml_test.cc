// NVML through the fake library built with the tests (tests/support/fake_nvml.cc), loaded by the
// same dlopen() path as the real one.
#include "common/gpu/nvml.h"

#include <gtest/gtest.h>

#include "tests/support/fake_nvml_scenario.h"

namespace granary::gpu {
namespace {

class NvmlTest : public ::testing::Test {
 protected:
  void play(const std::string& text) { scenario_.play(text); }
  static Result<std::unique_ptr<Nvml>> open() { return Nvml::open(GRANARY_FAKE_NVML_LIBRARY); }

  testing::FakeNvmlScenario scenario_;
};

constexpr const char* kH100 =
    "gpu GPU-0a1b NVIDIA_H100_80GB_HBM3 util=50 memutil=20 used=1073741824 total=85899345920 "
    "power_mw=300500 temp=41 sm_mhz=1980 tx_kbs=1024 rx_kbs=2048";

TEST_F(NvmlTest, WithoutTheLibraryItSaysThereIsNoDriver) {
  auto nvml = Nvml::open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(nvml.isOk());
  EXPECT_EQ(nvml.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(nvml.status().message().find("no NVIDIA driver"), std::string::npos) << nvml.status();
}

TEST_F(NvmlTest, AFailedStartSaysWhy) {
  play("init 9\n");  // NVML_ERROR_DRIVER_NOT_LOADED
  auto nvml = open();
  ASSERT_FALSE(nvml.isOk());
  EXPECT_NE(nvml.status().message().find("the NVIDIA driver is not loaded"), std::string::npos)
      << nvml.status();
}

TEST_F(NvmlTest, ReadsEveryFieldOfEightGpus) {
  std::string text = "driver 550.54.15\n";
  for (int i = 0; i < 8; ++i) text += std::string(kH100) + "\n";
  play(text);
  auto nvml = open();
  ASSERT_TRUE(nvml.isOk()) << nvml.status();
  EXPECT_EQ((*nvml)->driverVersion(), "550.54.15");
  auto readings = (*nvml)->read();
  ASSERT_TRUE(readings.isOk()) << readings.status();
  ASSERT_EQ(readings->size(), 8u);
  const GpuReading& r = (*readings)[7];
  EXPECT_EQ(r.index, 7);
  EXPECT_EQ(r.uuid, "GPU-0a1b");
  EXPECT_EQ(r.name, "NVIDIA H100 80GB HBM3");
  EXPECT_FALSE(r.lost);
  EXPECT_DOUBLE_EQ(r.utilization.value_or(-1), 0.5);
  EXPECT_DOUBLE_EQ(r.memoryUtilization.value_or(-1), 0.2);
  EXPECT_EQ(r.memoryUsedBytes.value_or(-1), int64_t{1} << 30);
  EXPECT_EQ(r.memoryTotalBytes.value_or(-1), int64_t{80} << 30);
  EXPECT_DOUBLE_EQ(r.powerWatts.value_or(-1), 300.5);
  EXPECT_DOUBLE_EQ(r.temperatureCelsius.value_or(-1), 41);
  EXPECT_DOUBLE_EQ(r.smClockHertz.value_or(-1), 1.98e9);
  EXPECT_DOUBLE_EQ(r.pcieTransmitBytesPerSecond.value_or(-1), 1024.0 * 1024);
  EXPECT_DOUBLE_EQ(r.pcieReceiveBytesPerSecond.value_or(-1), 2048.0 * 1024);
  EXPECT_TRUE(r.processes.empty());
}

TEST_F(NvmlTest, AFieldThatCannotBeReadIsEmptyAndTheRestIsRead) {
  play(std::string(kH100) + " unsupported=power,pcie,temp\n");
  auto nvml = open();
  ASSERT_TRUE(nvml.isOk()) << nvml.status();
  auto readings = (*nvml)->read();
  ASSERT_TRUE(readings.isOk());
  const GpuReading& r = readings->at(0);
  EXPECT_FALSE(r.powerWatts.has_value());
  EXPECT_FALSE(r.temperatureCelsius.has_value());
  EXPECT_FALSE(r.pcieTransmitBytesPerSecond.has_value());
  EXPECT_FALSE(r.pcieReceiveBytesPerSecond.has_value());
  EXPECT_DOUBLE_EQ(r.utilization.value_or(-1), 0.5);
  EXPECT_DOUBLE_EQ(r.smClockHertz.value_or(-1), 1.98e9);
}

TEST_F(NvmlTest, AGpuLostMidRunIsReportedAndTheOthersReadOn) {
  play(std::string(kH100) + "\n" + kH100 + "\n" + kH100 + "\n");
  auto nvml = open();
  ASSERT_TRUE(nvml.isOk()) << nvml.status();
  ASSERT_FALSE((*nvml)->read()->at(1).lost);
  play(std::string(kH100) + "\n" + kH100 + " lost\n" + kH100 + "\n");
  auto readings = (*nvml)->read();
  ASSERT_TRUE(readings.isOk());
  ASSERT_EQ(readings->size(), 3u);
  EXPECT_TRUE(readings->at(1).lost);
  EXPECT_FALSE(readings->at(1).utilization.has_value());
  EXPECT_FALSE(readings->at(0).lost);
  EXPECT_DOUBLE_EQ(readings->at(2).utilization.value_or(-1), 0.5);
}

TEST_F(NvmlTest, GpmActivityComesFromTwoReadingsWhereTheGpuSupportsIt) {
  play(std::string(kH100) + " sm_active=60 tensor_active=35\n" + kH100 + " unsupported=gpm\n");
  auto nvml = open();
  ASSERT_TRUE(nvml.isOk()) << nvml.status();
  auto first = (*nvml)->read();
  ASSERT_TRUE(first.isOk());
  EXPECT_FALSE(first->at(0).smActivity.has_value()) << "one GPM sample compares with nothing";
  EXPECT_FALSE(first->at(0).tensorActivity.has_value());

  play(std::string(kH100) + " sm_active=80 tensor_active=45\n" + kH100 + " unsupported=gpm\n");
  auto second = (*nvml)->read();
  ASSERT_TRUE(second.isOk());
  EXPECT_DOUBLE_EQ(second->at(0).smActivity.value_or(-1), 0.8);
  EXPECT_DOUBLE_EQ(second->at(0).tensorActivity.value_or(-1), 0.45);
  const GpuReading& older = second->at(1);  // a GPU before Hopper: no GPM, the rest is read
  EXPECT_FALSE(older.smActivity.has_value());
  EXPECT_FALSE(older.tensorActivity.has_value());
  EXPECT_FALSE(older.lost);
  EXPECT_DOUBLE_EQ(older.utilization.value_or(-1), 0.5);

  // Lost and back: its activity starts over from a fresh pair of samples.
  play(std::string(kH100) + " lost\n" + kH100 + " unsupported=gpm\n");
  EXPECT_TRUE((*nvml)->read()->at(0).lost);
  play(std::string(kH100) + " sm_active=10 tensor_active=0\n" + kH100 + " unsupported=gpm\n");
  EXPECT_FALSE((*nvml)->read()->at(0).smActivity.has_value());
  auto back = (*nvml)->read();
  EXPECT_DOUBLE_EQ(back->at(0).smActivity.value_or(-1), 0.1);
  EXPECT_DOUBLE_EQ(back->at(0).tensorActivity.value_or(-1), 0.0);
}

TEST_F(NvmlTest, AProcessIsFoundOnTheGpuItRunsOnAndFollowedWhenItMoves) {
  play(std::string(kH100) + "\n" + kH100 + "\nproc 0 4242 536870912 70\n");
  auto nvml = open();
  ASSERT_TRUE(nvml.isOk()) << nvml.status();
  auto readings = (*nvml)->read();
  ASSERT_TRUE(readings.isOk());
  ASSERT_EQ(readings->at(0).processes.size(), 1u);
  const GpuProcess& p = readings->at(0).processes[0];
  EXPECT_EQ(p.pid, 4242);
  EXPECT_EQ(p.memoryUsedBytes.value_or(-1), 512 << 20);
  EXPECT_DOUBLE_EQ(p.smUtilization.value_or(-1), 0.7);
  EXPECT_TRUE(readings->at(1).processes.empty());

  play(std::string(kH100) + "\n" + kH100 + "\nproc 1 4242 536870912 30\n");
  readings = (*nvml)->read();
  ASSERT_TRUE(readings.isOk());
  EXPECT_TRUE(readings->at(0).processes.empty());
  ASSERT_EQ(readings->at(1).processes.size(), 1u);
  EXPECT_DOUBLE_EQ(readings->at(1).processes[0].smUtilization.value_or(-1), 0.3);
}

}  // namespace
}  // namespace granary::gpu
