// The GPU sampler over the fake NVML (tests/support/fake_nvml.cc): series with dcgm-exporter's
// label words, fields and GPUs that go take their series with them, and a node without NVML
// that says why and carries on.
#include "cache-node/gpu/gpu_sampler.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "tests/support/fake_nvml_scenario.h"

namespace granary::cache {
namespace {

using namespace std::chrono_literals;

class GpuSamplerTest : public ::testing::Test {
 protected:
  void play(const std::string& text) { scenario_.play(text); }
  // Polls the exposition until `done` holds (the sampler runs every 100 ms) or 5 s pass.
  std::string exposition(const std::function<bool(const std::string&)>& done) {
    std::string text = registry_.exposition();
    for (int i = 0; i < 100 && !done(text); ++i) {
      std::this_thread::sleep_for(50ms);
      text = registry_.exposition();
    }
    return text;
  }

  testing::FakeNvmlScenario scenario_;
  MetricsRegistry registry_;
};

constexpr const char* kGpu =
    "gpu GPU-0a1b NVIDIA_H100 util=75 used=1024 total=4096 power_mw=250000";
// As the exposition writes them: sorted by name.
const std::string kLabels = R"({Hostname="n1",UUID="GPU-0a1b",gpu="0",modelName="NVIDIA H100"})";
const std::string kSecondGpu =
    R"(granary_gpu_utilization_ratio{Hostname="n1",UUID="GPU-0a1b",gpu="1")";

TEST_F(GpuSamplerTest, ExportsEachFieldAndDropsWhatGoes) {
  play(std::string(kGpu) + "\n" + kGpu + "\n");
  auto sampler =
      GpuSampler::start({.library = GRANARY_FAKE_NVML_LIBRARY, .interval = 100ms, .hostname = "n1"},
                        realClock(), &registry_);
  ASSERT_TRUE(sampler.isOk()) << sampler.status();
  EXPECT_EQ((*sampler)->unavailableReason(), "");
  ASSERT_EQ((*sampler)->latest().size(), 2u) << "the first sample is taken at start";
  std::string text = registry_.exposition();
  EXPECT_NE(text.find("granary_gpu_sampler_up 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("granary_gpu_utilization_ratio" + kLabels + " 0.75\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("granary_gpu_power_watts" + kLabels + " 250\n"), std::string::npos) << text;
  EXPECT_NE(text.find("granary_gpu_memory_total_bytes" + kLabels + " 4096\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find(kSecondGpu), std::string::npos) << text;

  // Power can no longer be read on GPU 0, and GPU 1 falls off the bus.
  play(std::string(kGpu) + " unsupported=power\n" + kGpu + " lost\n");
  text = exposition([](const std::string& t) { return t.find(kSecondGpu) == std::string::npos; });
  EXPECT_EQ(text.find(kSecondGpu), std::string::npos) << text;
  EXPECT_EQ(text.find("granary_gpu_power_watts{"), std::string::npos) << text;
  EXPECT_NE(text.find("granary_gpu_utilization_ratio" + kLabels + " 0.75\n"), std::string::npos)
      << text;
  const auto latest = (*sampler)->latest();
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_TRUE(latest[1].lost);
}

TEST_F(GpuSamplerTest, WithoutNvmlTheNodeSaysWhyAndCarriesOn) {
  auto sampler =
      GpuSampler::start({.library = "/nonexistent/libnvidia-ml.so.1"}, realClock(), &registry_);
  ASSERT_TRUE(sampler.isOk()) << sampler.status();
  EXPECT_NE((*sampler)->unavailableReason().find("no NVIDIA driver"), std::string::npos)
      << (*sampler)->unavailableReason();
  EXPECT_TRUE((*sampler)->latest().empty());
  EXPECT_NE(registry_.exposition().find("granary_gpu_sampler_up 0\n"), std::string::npos);
}

TEST_F(GpuSamplerTest, RefusesAnIntervalOutOfBounds) {
  for (const std::chrono::milliseconds interval : {10ms, 61000ms}) {
    auto sampler = GpuSampler::start({.library = GRANARY_FAKE_NVML_LIBRARY, .interval = interval},
                                     realClock(), nullptr);
    EXPECT_EQ(sampler.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(sampler.status().message().find("gpuSampleInterval"), std::string::npos);
  }
}

}  // namespace
}  // namespace granary::cache
