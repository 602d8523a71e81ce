// A Dataset's status from its nodes' reports.
#include "operator/core/dataset_status.h"

#include <gtest/gtest.h>

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
