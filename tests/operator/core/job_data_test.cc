// The pure parts of the operator's data path: who reads a Dataset, and the job's data and GPU
// summaries from two telemetry samples.
#include "operator/core/job_data.h"

#include <gtest/gtest.h>

#include "operator/core/readers.h"
#include "tests/support/cluster.h"

namespace granary::op {
namespace {

using kube::Json;
using namespace std::chrono_literals;

JobSample sampleAt(std::chrono::seconds at, std::map<std::string, WorkerReads> workers) {
  return JobSample{.at = Clock::MonoTime(at), .workers = std::move(workers)};
}

TEST(JobDataTest, RatesComeFromTheIntervalAndTheLocalShareFromEveryByteSoFar) {
  const JobSample earlier = sampleAt(100s, {{"w0", {1.0, 1000, 0}}, {"w1", {0.0, 0, 0}}});
  const JobSample later = sampleAt(120s, {{"w0", {3.0, 3000, 0}}, {"w1", {6.0, 1000, 1000}}});
  const Json data = dataSummary(earlier, later);
  // (2 + 6) s waited over 20 s × 2 workers; 4,000 bytes in 20 s; 4,000 of 5,000 local.
  EXPECT_DOUBLE_EQ(data.at("waitFraction").as_double(), 0.2);
  EXPECT_EQ(data.at("readBytesPerSecond").as_number().to_int64(), 200);
  EXPECT_DOUBLE_EQ(data.at("localFraction").as_double(), 0.8);
}

TEST(JobDataTest, OnlyWorkersInBothSamplesCountAndRestartedCountersStartFromZero) {
  const JobSample earlier = sampleAt(0s, {{"w0", {50.0, 9000, 0}}});
  // w0's node restarted (its counters fell); w1 was not reachable before.
  const JobSample later = sampleAt(10s, {{"w0", {1.0, 100, 0}}, {"w1", {9.0, 0, 100}}});
  const Json data = dataSummary(earlier, later);
  EXPECT_DOUBLE_EQ(data.at("waitFraction").as_double(), 0.1);
  EXPECT_EQ(data.at("readBytesPerSecond").as_number().to_int64(), 10);
  EXPECT_DOUBLE_EQ(data.at("localFraction").as_double(), 0.5);
}

TEST(JobDataTest, ParallelLoadersSaturateTheWaitFractionAndNothingReadLeavesNoLocalShare) {
  EXPECT_DOUBLE_EQ(dataSummary(sampleAt(0s, {{"w0", {}}}), sampleAt(1s, {{"w0", {8.0, 0, 0}}}))
                       .at("waitFraction")
                       .as_double(),
                   1.0);
  const Json idle = dataSummary(sampleAt(0s, {{"w0", {}}}), sampleAt(1s, {{"w0", {}}}));
  EXPECT_EQ(idle.at("readBytesPerSecond").as_number().to_int64(), 0);
  EXPECT_FALSE(idle.has_field("localFraction"));
  EXPECT_TRUE(dataSummary(sampleAt(0s, {}), sampleAt(1s, {{"w0", {}}})).is_null());
  EXPECT_TRUE(dataSummary(sampleAt(1s, {{"w0", {}}}), sampleAt(1s, {{"w0", {}}})).is_null());
}

TEST(JobDataTest, GpuSummaryIsTheMeanOverTheWindowOfEachGpuInBothSamples) {
  EXPECT_TRUE(gpuSummary(JobSample{}, JobSample{}).is_null());
  JobSample earlier = sampleAt(0s, {});
  earlier.gpus = {{"GPU-a", {100, 50, 100.0 * (1 << 20)}}, {"GPU-b", {100, 90, 0}}};
  JobSample later = sampleAt(20s, {});
  // Over the 20 s window: GPU-a 0.9 busy with 1 MiB, then GPU-b 0.5 busy with 3 MiB; GPU-c is
  // new (not counted until the next window).
  later.gpus = {{"GPU-a", {120, 68, 120.0 * (1 << 20)}},
                {"GPU-b", {120, 100, 20.0 * (3 << 20)}},
                {"GPU-c", {5, 5, 0}}};
  const Json gpu = gpuSummary(earlier, later);
  ASSERT_TRUE(gpu.is_object());
  EXPECT_EQ(gpu.at("windowSeconds").as_number().to_int64(), 20);
  EXPECT_DOUBLE_EQ(gpu.at("utilization").as_double(), 0.7);
  EXPECT_EQ(gpu.at("memoryUsedBytes").as_number().to_int64(), 4 << 20);
  EXPECT_FALSE(gpu.has_field("dataStarvedFraction")) << "no pod in both samples";
  EXPECT_TRUE(gpuSummary(JobSample{}, later).is_null()) << "one sample is no window";

  // GPU-b's node restarted: its totals start over, and it sits this window out.
  later.gpus["GPU-b"] = {3, 3, 0};
  EXPECT_DOUBLE_EQ(gpuSummary(earlier, later).at("utilization").as_double(), 0.9);
}

TEST(JobDataTest, DataStarvedFractionIsThePodsMeanShareOfTheInterval) {
  JobSample earlier = sampleAt(0s, {});
  earlier.starvedSeconds = {{"w0", 10}, {"w1", 0}, {"gone", 3}};
  earlier.gpus = {{"GPU-a", {0, 0, 0}}};
  JobSample later = sampleAt(10s, {});
  later.gpus = {{"GPU-a", {10, 1, 0}}};
  // w0 starved 6 s of 10; w1 none; w2 is new (not counted); a counter that went down counts
  // from zero.
  later.starvedSeconds = {{"w0", 16}, {"w1", 0}, {"w2", 5}};
  EXPECT_DOUBLE_EQ(gpuSummary(earlier, later).at("dataStarvedFraction").as_double(), 0.3);
  earlier.starvedSeconds["w1"] = 50;  // the node restarted: w1 counts its 0 s from zero
  EXPECT_DOUBLE_EQ(gpuSummary(earlier, later).at("dataStarvedFraction").as_double(), 0.3);
}

kube::ObjectPtr pod(const std::string& yamlText) {
  return std::make_shared<const Json>(granary::testing::yaml(yamlText));
}

TEST(ReadersTest, PlacedUnfinishedWorkersThatMountTheDatasetAndMayWarmIt) {
  const std::string volumes =
      "volumes: [{name: d, csi: {driver: csi.granary.io, volumeAttributes: {dataset: coco}}}]";
  const std::vector<kube::ObjectPtr> pods = {
      pod("metadata: {name: w1, namespace: ml, uid: u1, labels: {granary.io/rank: \"1\"}}\n"
          "spec: {nodeName: n2, " +
          volumes + "}"),
      pod("metadata: {name: w0, namespace: ml, uid: u0, labels: {granary.io/rank: \"0\"}}\n"
          "spec: {nodeName: n1, " +
          volumes + "}\nstatus: {phase: Running}"),
      pod("metadata: {name: pending, namespace: ml, uid: u2}\nspec: {" + volumes + "}"),
      pod("metadata: {name: done, namespace: ml, uid: u3}\nspec: {nodeName: n1, " + volumes +
          "}\nstatus: {phase: Succeeded}"),
      pod("metadata: {name: cold, namespace: ml, uid: u4, labels: {granary.io/warm: \"false\"}}\n"
          "spec: {nodeName: n1, " +
          volumes + "}"),
      pod("metadata: {name: other, namespace: ml, uid: u5}\nspec: {nodeName: n1, volumes: "
          "[{name: d, csi: {driver: other.csi.io, volumeAttributes: {dataset: coco}}}]}"),
  };
  const auto readers = readersOf(pods, "coco");
  ASSERT_EQ(readers.size(), 2u);
  EXPECT_EQ(readers[0], (DatasetReader{"ml", "w0", "u0", "n1", 0, /*running=*/true}));
  EXPECT_EQ(readers[1], (DatasetReader{"ml", "w1", "u1", "n2", 1}));
  EXPECT_TRUE(readersOf(pods, "imagenet").empty());
  EXPECT_EQ(datasetsMountedBy(*pods[0]), std::vector<std::string>{"coco"});
}

}  // namespace
}  // namespace granary::op
