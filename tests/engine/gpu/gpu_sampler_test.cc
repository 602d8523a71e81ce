// The GPU sampler over the fake NVML (tests/support/fake_nvml.cc): series with dcgm-exporter's
// label words, fields and GPUs that go take their series with them, and a node without NVML
// that says why and carries on.
#include "engine/gpu/gpu_sampler.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "tests/support/eventually.h"
#include "tests/support/fake_clock.h"
#include "tests/support/fake_kubelet.h"
#include "tests/support/fake_nvml_scenario.h"

namespace granary::cache {
namespace {

using namespace std::chrono_literals;

class GpuSamplerTest : public ::testing::Test {
 protected:
  void play(const std::string& text) { scenario_.play(text); }
  // Waits until the exposition satisfies `done` (the sampler runs every 100 ms) or 5 s pass.
  std::string exposition(const std::function<bool(const std::string&)>& done) {
    std::string text;
    testing::eventually([&] { return done(text = registry_.exposition()); }, 5s);
    return text;
  }

  testing::FakeNvmlScenario scenario_;
  MetricsRegistry registry_;
};

constexpr const char* kGpu =
    "gpu GPU-0a1b NVIDIA_H100 util=75 used=1024 total=4096 power_mw=250000";
// As the exposition writes them: sorted by name.
const std::string kLabels =
    R"({Hostname="n1",UUID="GPU-0a1b",container="",gpu="0",modelName="NVIDIA H100",namespace="",pod=""})";
const std::string kSecondGpu =
    R"(granary_gpu_utilization_ratio{Hostname="n1",UUID="GPU-0a1b",container="",gpu="1")";

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
  // A sample's series go one by one (an exposition taken meanwhile has some of them): waits for
  // them all.
  const auto gone = [](const std::string& t) {
    return t.find(R"(gpu="1")") == std::string::npos &&
           t.find("granary_gpu_power_watts{") == std::string::npos;
  };
  text = exposition(gone);
  EXPECT_TRUE(gone(text)) << "every series of GPU 1 and GPU 0's power go\n" << text;
  EXPECT_NE(text.find("granary_gpu_utilization_ratio" + kLabels + " 0.75\n"), std::string::npos)
      << text;
  const auto latest = (*sampler)->latest();
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_TRUE(latest[1].lost);
}

TEST_F(GpuSamplerTest, GpmActivityIsExportedWhereTheGpuHasIt) {
  play(std::string(kGpu) + " sm_active=62 tensor_active=40\n" + kGpu + " unsupported=gpm\n");
  auto sampler =
      GpuSampler::start({.library = GRANARY_FAKE_NVML_LIBRARY, .interval = 100ms, .hostname = "n1"},
                        realClock(), &registry_);
  ASSERT_TRUE(sampler.isOk()) << sampler.status();
  const std::string sm = "granary_gpu_sm_active_ratio" + kLabels + " 0.62\n";
  const std::string tensor = "granary_gpu_tensor_active_ratio" + kLabels + " 0.4\n";
  const std::string text = exposition([&](const std::string& t) {
    return t.find(sm) != std::string::npos && t.find(tensor) != std::string::npos;
  });
  EXPECT_NE(text.find(sm), std::string::npos) << "from the second sample on\n" << text;
  EXPECT_NE(text.find(tensor), std::string::npos) << text;
  EXPECT_EQ(
      text.find(
          R"(granary_gpu_sm_active_ratio{Hostname="n1",UUID="GPU-0a1b",container="",gpu="1")"),
      std::string::npos)
      << "a GPU without GPM has no activity series\n"
      << text;
}

TEST_F(GpuSamplerTest, EachGpuIsIntegratedForMeansOverAnyWindow) {
  play(std::string(kGpu) + "\n");
  testing::FakeClock clock;
  auto sampler =
      GpuSampler::start({.library = GRANARY_FAKE_NVML_LIBRARY, .interval = 100ms}, clock, nullptr);
  ASSERT_TRUE(sampler.isOk()) << sampler.status();
  const auto window = [&] { return (*sampler)->totals()["GPU-0a1b"]; };
  // One interval of the sampler's clock, and the sample it takes then.
  const auto sampleOnce = [&] {
    const double sampled = window().sampledSeconds;
    clock.waitForSleepers(1);
    clock.advance(100ms);
    return testing::eventually([&] { return window().sampledSeconds > sampled; }, 5s);
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sampleOnce());
  const GpuTotals before = window();
  EXPECT_NEAR(before.sampledSeconds, 0.3, 1e-9);
  EXPECT_NEAR(before.busySeconds / before.sampledSeconds, 0.75, 1e-9);
  EXPECT_NEAR(before.memoryByteSeconds / before.sampledSeconds, 1024, 1e-6);

  play("gpu GPU-0a1b NVIDIA_H100 util=25 used=3072 total=4096\n");  // the load changes
  ASSERT_TRUE(sampleOnce());
  ASSERT_EQ((*sampler)->latest().at(0).utilization, 0.25);
  const GpuTotals changed = window();  // from here on, every sample has the new figures
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(sampleOnce());
  const GpuTotals after = window();
  const double seconds = after.sampledSeconds - changed.sampledSeconds;
  EXPECT_NEAR(seconds, 0.5, 1e-9);
  EXPECT_NEAR((after.busySeconds - changed.busySeconds) / seconds, 0.25, 1e-9);
  EXPECT_NEAR((after.memoryByteSeconds - changed.memoryByteSeconds) / seconds, 3072, 1e-6);
}

TEST_F(GpuSamplerTest, GpusAreAttributedToThePodsTheKubeletAllocatedThemTo) {
  play("gpu GPU-aaaa H100 util=90\ngpu GPU-bbbb H100 util=10\n");
  const auto socket = std::filesystem::temp_directory_path() /
                      ("granary-kubelet-" + std::to_string(::getpid()) + ".sock");
  testing::FakeKubelet kubelet(socket);
  kubelet.setPods({{"ml", "resnet-worker-0", "trainer", {"GPU-bbbb::1"}},
                   {"ml", "cpu-only", "c", {"0000:00:1f.0"}, "example.com/nic"}});
  auto sampler = GpuSampler::start({.library = GRANARY_FAKE_NVML_LIBRARY,
                                    .interval = 100ms,
                                    .hostname = "n1",
                                    .podResourcesSocket = socket.string()},
                                   realClock(), &registry_);
  ASSERT_TRUE(sampler.isOk()) << sampler.status();
  auto latest = (*sampler)->latest();
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].podName, "") << "GPU 0 is allocated to no pod";
  EXPECT_EQ(latest[1].podNamespace, "ml");
  EXPECT_EQ(latest[1].podName, "resnet-worker-0") << "a time-sliced replica names its GPU";
  EXPECT_EQ(latest[1].container, "trainer");
  const std::string owned =
      R"(granary_gpu_utilization_ratio{Hostname="n1",UUID="GPU-bbbb",container="trainer",gpu="1",modelName="H100",namespace="ml",pod="resnet-worker-0"} 0.1)";
  EXPECT_NE(registry_.exposition().find(owned), std::string::npos) << registry_.exposition();

  // The pod ends: its GPU's series goes with its labels, and comes back unattributed.
  kubelet.setPods({});
  const std::string text =
      exposition([&](const std::string& t) { return t.find(owned) == std::string::npos; });
  EXPECT_EQ(text.find(owned), std::string::npos) << text;
  EXPECT_NE(
      text.find(
          R"(UUID="GPU-bbbb",container="",gpu="1",modelName="H100",namespace="",pod=""} 0.1)"),
      std::string::npos)
      << text;
}

TEST_F(GpuSamplerTest, APodWhoseGpusIdleWhileItsReadersWaitIsDataStarved) {
  play("gpu GPU-aaaa H100 util=5\ngpu GPU-bbbb H100 util=95\n");
  const auto socket = std::filesystem::temp_directory_path() /
                      ("granary-kubelet-starved-" + std::to_string(::getpid()) + ".sock");
  testing::FakeKubelet kubelet(socket);
  kubelet.setPods(
      {{"ml", "starved-0", "trainer", {"GPU-aaaa"}}, {"ml", "busy-0", "trainer", {"GPU-bbbb"}}});
  // Both pods' readers wait all the time: 1 s of wait per second of the clock.
  const auto start = std::chrono::steady_clock::now();
  const auto waiting = [start] {
    const auto waited = std::chrono::steady_clock::now() - start;
    return std::map<std::string, std::chrono::nanoseconds>{{"ml/starved-0", waited},
                                                           {"ml/busy-0", waited}};
  };
  auto sampler = GpuSampler::start({.library = GRANARY_FAKE_NVML_LIBRARY,
                                    .interval = 100ms,
                                    .hostname = "n1",
                                    .podResourcesSocket = socket.string(),
                                    .readerWait = waiting},
                                   realClock(), &registry_);
  ASSERT_TRUE(sampler.isOk()) << sampler.status();
  const std::string starved =
      R"(granary_pod_data_starved_seconds_total{namespace="ml",pod="starved-0"} )";
  const std::string text = exposition([&](const std::string& t) {
    const size_t at = t.find(starved);
    return at != std::string::npos && std::stod(t.substr(at + starved.size())) >= 0.3;
  });
  ASSERT_NE(text.find(starved), std::string::npos) << text;
  EXPECT_GE(std::stod(text.substr(text.find(starved) + starved.size())), 0.3);
  EXPECT_NE(text.find(R"(granary_pod_data_starved_seconds_total{namespace="ml",pod="busy-0"} 0
)"),
            std::string::npos)
      << "its GPU is busy: waiting does not starve it\n"
      << text;
  const auto seconds = (*sampler)->starvedSeconds();
  EXPECT_GE(seconds.at("ml/starved-0"), 0.3);
  EXPECT_EQ(seconds.at("ml/busy-0"), 0.0);

  kubelet.setPods({{"ml", "busy-0", "trainer", {"GPU-bbbb"}}});  // starved-0 ended
  const std::string after =
      exposition([&](const std::string& t) { return t.find(starved) == std::string::npos; });
  EXPECT_EQ(after.find(starved), std::string::npos) << "an ended pod's series goes\n" << after;
}

TEST_F(GpuSamplerTest, WithoutTheKubeletGpusGoUnattributedAndSamplingGoesOn) {
  play("gpu GPU-aaaa H100 util=90\n");
  auto sampler = GpuSampler::start({.library = GRANARY_FAKE_NVML_LIBRARY,
                                    .interval = 100ms,
                                    .hostname = "n1",
                                    .podResourcesSocket = "/nonexistent/kubelet.sock"},
                                   realClock(), &registry_);
  ASSERT_TRUE(sampler.isOk()) << sampler.status();
  const auto latest = (*sampler)->latest();
  ASSERT_EQ(latest.size(), 1u);
  EXPECT_EQ(latest[0].podName, "");
  EXPECT_EQ(latest[0].utilization, 0.9);
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
