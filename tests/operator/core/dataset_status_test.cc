// A Dataset's status from its nodes' reports.
#include "operator/core/dataset_status.h"

#include <gtest/gtest.h>

#include "operator/core/conditions.h"

namespace granary::op {
namespace {

NodeReport ready(const std::string& node, int64_t ownedBytes, int64_t cachedBytes,
                 int64_t ownedFiles, int64_t cachedFiles) {
  NodeProgress p{.phase = DatasetPhase::kReady,
                 .totalFiles = 10,
                 .totalBytes = 1000,
                 .ownedFiles = ownedFiles,
                 .ownedBytes = ownedBytes,
                 .cachedFiles = cachedFiles,
                 .cachedBytes = cachedBytes,
                 .etaSeconds = 0};
  return {.nodeName = node, .progress = p};
}

// A Ready dataset is not always wholly cached (a quota under its size, LRU evicting, warm:
// Never): the status says what the nodes hold, never the dataset's size.
TEST(DatasetStatus, ReadyCountsWhatTheNodesHold) {
  DatasetProgress o{.generation = 1,
                    .reports = {ready("a", 600, 300, 6, 2), ready("b", 400, 100, 4, 1)}};
  const kube::Json status = datasetStatus(o, kube::Json(), std::chrono::system_clock::now());
  EXPECT_EQ(status.at("phase").as_string(), "Ready");
  EXPECT_EQ(status.at("cachedBytes").as_integer(), 400);
  EXPECT_EQ(status.at("cachedFiles").as_integer(), 3);
  EXPECT_EQ(status.at("cachedPercentage").as_string(), "40.0%");
}

// Pods a node reports cut off qualify Ready and make ReadersCutOff True, naming them with the
// fix; once none is, the condition turns False, and a dataset where it never happened has none.
TEST(DatasetStatus, PodsCutOffFromTheirViewAreNamedUntilNoneIs) {
  const auto now = std::chrono::system_clock::now();
  DatasetProgress o{.generation = 1, .reports = {ready("a", 1000, 1000, 10, 10)}};
  const kube::Json healthy = datasetStatus(o, kube::Json(), now);
  EXPECT_EQ(healthy.at("conditions").serialize().find("ReadersCutOff"), std::string::npos)
      << "absent until it happens";

  o.reports[0].progress->cutOff = {{"ml", "bert-worker-1", "u1", now},
                                   {"ml", "bert-worker-0", "u0", now}};
  const kube::Json cut = datasetStatus(o, healthy, now);
  EXPECT_EQ(cut.at("phase").as_string(), "Ready") << "new jobs still read it";
  const Condition readers = conditionOf(cut, "ReadersCutOff");
  EXPECT_TRUE(readers.status);
  EXPECT_EQ(readers.reason, "MountEnded");
  EXPECT_NE(readers.message.find("2 pods lost their view"), std::string::npos) << readers.message;
  EXPECT_NE(readers.message.find("ml/bert-worker-0 on a, ml/bert-worker-1 on a"), std::string::npos)
      << readers.message;
  EXPECT_NE(readers.message.find("restart them"), std::string::npos) << readers.message;
  EXPECT_NE(conditionOf(cut, "Ready").message.find("see ReadersCutOff"), std::string::npos);

  o.reports[0].progress->cutOff.clear();
  const kube::Json restarted = datasetStatus(o, cut, now);
  EXPECT_FALSE(conditionOf(restarted, "ReadersCutOff").status);
  EXPECT_EQ(conditionOf(restarted, "ReadersCutOff").reason, "NoneCutOff");
  EXPECT_EQ(conditionOf(restarted, "Ready").message.find("ReadersCutOff"), std::string::npos);
}

TEST(DatasetStatus, ReplicasAreCountedOnce) {
  DatasetProgress o{.generation = 1,
                    .cache = {.replicas = 2},
                    .reports = {ready("a", 1000, 1000, 10, 10), ready("b", 1000, 1000, 10, 10)}};
  const kube::Json status = datasetStatus(o, kube::Json(), std::chrono::system_clock::now());
  EXPECT_EQ(status.at("cachedBytes").as_integer(), 1000);
  EXPECT_EQ(status.at("cachedFiles").as_integer(), 10);
  EXPECT_EQ(status.at("cachedPercentage").as_string(), "100.0%");
}

}  // namespace
}  // namespace granary::op
