#include "common/gpu/cuda_device.h"

#include <gtest/gtest.h>

namespace granary::gpu {
namespace {

TEST(CudaDevice, NoGpuIsReportedAsUnavailableWithAReason) {
  auto devices = listCudaDevices();
  if (devices.isOk()) {
    EXPECT_FALSE(devices->empty());
    GTEST_SKIP() << "a GPU is present; the no-GPU path is exercised on machines without one";
  }
  EXPECT_EQ(devices.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(devices.status().message().empty());
  EXPECT_EQ(selfTestCudaDevice(0, 1024).status().code(), StatusCode::kUnavailable);
}

TEST(CudaDevice, SelfTestComputesCorrectResultsOnEveryGpu) {
  auto devices = listCudaDevices();
  if (!devices.isOk()) GTEST_SKIP() << "no usable GPU here: " << devices.status().message();
  for (const auto& device : *devices) {
    EXPECT_FALSE(device.name.empty());
    EXPECT_GE(device.computeMajor, 7) << device.name;
    EXPECT_GT(device.memoryBytes, 0);
    auto seconds = selfTestCudaDevice(device.index, 1 << 24);
    ASSERT_TRUE(seconds.isOk()) << seconds.status();
    EXPECT_GT(*seconds, 0.0);
  }
  EXPECT_EQ(selfTestCudaDevice(static_cast<int>(devices->size()), 16).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CudaDevice, BuildFlagMatchesTheBuild) {
#if defined(GRANARY_EXPECT_CUDA)
  EXPECT_TRUE(builtWithCuda());
#else
  EXPECT_FALSE(builtWithCuda());
#endif
}

}  // namespace
}  // namespace granary::gpu
