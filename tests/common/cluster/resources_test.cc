#include "common/cluster/resources.h"

#include <gtest/gtest.h>

#include <limits>

namespace granary::cluster {
namespace {

TEST(Resources, ParsesKubernetesQuantities) {
  Resources r;
  ASSERT_TRUE(addQuantity(r, "cpu", "500m").isOk());
  ASSERT_TRUE(addQuantity(r, "cpu", "1.5").isOk());
  ASSERT_TRUE(addQuantity(r, "memory", "2Gi").isOk());
  ASSERT_TRUE(addQuantity(r, "ephemeral-storage", "10G").isOk());
  ASSERT_TRUE(addQuantity(r, "pods", "110").isOk());
  ASSERT_TRUE(addQuantity(r, "nvidia.com/gpu", "8").isOk());
  EXPECT_EQ(r.milliCpu, 2000);
  EXPECT_EQ(r.memory, int64_t{2} << 30);
  EXPECT_EQ(r.ephemeralStorage, 10'000'000'000);
  EXPECT_EQ(r.pods, 110);
  EXPECT_EQ(r.gpus(), 8);
  EXPECT_FALSE(addQuantity(r, "cpu", "lots").isOk());
  EXPECT_NE(addQuantity(r, "memory", "1.5.5Gi").message().find("memory"), std::string::npos);
}

TEST(Resources, EffectiveRequestsCountInitContainersAsKubernetesDoes) {
  Resources containers, init, overhead;
  containers.milliCpu = 1000;
  containers.memory = 100;
  containers.extended["nvidia.com/gpu"] = 2;
  init.milliCpu = 3000;  // an init container larger than all containers together
  init.memory = 50;
  overhead.milliCpu = 250;
  const Resources r = effectiveRequests(containers, init, overhead);
  EXPECT_EQ(r.milliCpu, 3250);
  EXPECT_EQ(r.memory, 100);
  EXPECT_EQ(r.gpus(), 2);
  EXPECT_EQ(r.pods, 1);
}

TEST(Resources, ShortfallNamesTheResourceAndCopiesCount) {
  Resources free, request;
  free.milliCpu = 4000;
  free.memory = 1000;
  free.pods = 10;
  free.extended["nvidia.com/gpu"] = 6;
  request.milliCpu = 1000;
  request.pods = 1;
  request.extended["nvidia.com/gpu"] = 4;
  EXPECT_EQ(shortfall(request, free), "");
  EXPECT_EQ(copiesThatFit(request, free), 1);
  request.extended["nvidia.com/gpu"] = 8;
  EXPECT_EQ(shortfall(request, free), "Insufficient nvidia.com/gpu");
  EXPECT_EQ(copiesThatFit(request, free), 0);
  request.extended.clear();
  request.memory = 2000;
  EXPECT_EQ(shortfall(request, free), "Insufficient memory");
  request.memory = 0;
  free.pods = 0;
  EXPECT_EQ(shortfall(request, free), "Too many pods");
}

TEST(Resources, CpuBeyondWhatMillicoresHoldIsRefused) {
  // Found by tests/fuzz/extender_fuzz (a pod's cpu request of 4.5e112 cores): converting it to
  // millicores overflowed int64_t.
  Resources r;
  EXPECT_EQ(addQuantity(r, "cpu", "45555555555555555555555555555555555555555555555555555").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(addQuantity(r, "cpu", "1e300").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.milliCpu, 0);
  ASSERT_TRUE(addQuantity(r, "cpu", "9e15").isOk());
  EXPECT_EQ(r.milliCpu, int64_t{9'000'000'000'000'000'000});
}

TEST(Resources, SumsOfHugeRequestsSaturateInsteadOfOverflowing) {
  // Two containers asking 7Ei of memory each overflowed int64_t (undefined) when added up, as the
  // scheduler and its extender add a pod's containers; such a pod now fits nowhere.
  Resources pod;
  ASSERT_TRUE(addQuantity(pod, "memory", "7Ei").isOk());
  ASSERT_TRUE(addQuantity(pod, "memory", "7Ei").isOk());
  ASSERT_TRUE(addQuantity(pod, "nvidia.com/gpu", "7Ei").isOk());
  ASSERT_TRUE(addQuantity(pod, "nvidia.com/gpu", "7Ei").isOk());
  EXPECT_EQ(pod.memory, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(pod.gpus(), std::numeric_limits<int64_t>::max());
  Resources sum = pod;
  sum += pod;
  EXPECT_EQ(sum.memory, std::numeric_limits<int64_t>::max());
  Resources free;
  free.memory = int64_t{512} << 30;
  free.pods = 110;
  free -= sum;
  EXPECT_EQ(free.memory, (int64_t{512} << 30) - std::numeric_limits<int64_t>::max());
  free -= sum;
  EXPECT_EQ(free.memory, std::numeric_limits<int64_t>::min());
  pod.pods = 1;
  EXPECT_EQ(shortfall(pod, free), "Insufficient memory");
}

}  // namespace
}  // namespace granary::cluster
