// A TrainingJob's status.checkpoints from the volumes its workers' nodes report.
#include "operator/core/job_checkpoints.h"

#include <gtest/gtest.h>

namespace granary::op {
namespace {

using kube::Json;

TEST(JobCheckpointsTest, NamesTheNewestTheNewestAtTheOriginAndWhereEachIs) {
  const std::vector<CheckpointVolumeReport> reports = {
      {.node = "n1",
       .pendingFiles = 2,
       .pendingBytes = 300,
       .uploadLagSeconds = 4.04,
       .checkpoints = {{"step-30", 2, 300, false}, {"step-20", 2, 200, true}}},
      {.node = "n2",
       .pendingFiles = 1,
       .pendingBytes = 100,
       .uploadLagSeconds = 9.96,
       .lastError = "origin: 503 Slow Down",
       .checkpoints = {
           {"step-30", 1, 100, false}, {"step-20", 1, 100, true}, {"step-10", 2, 200, true}}}};
  const Json s = checkpointSummary(reports);
  EXPECT_EQ(s.at("newest").as_string(), "step-30");
  EXPECT_EQ(s.at("newestAtOrigin").as_string(), "step-20");
  EXPECT_EQ(s.at("pendingFiles").as_integer(), 3);
  EXPECT_EQ(s.at("pendingBytes").as_integer(), 400);
  EXPECT_DOUBLE_EQ(s.at("uploadLagSeconds").as_double(), 10.0) << "the largest, rounded";
  EXPECT_EQ(s.at("lastError").as_string(), "n2: origin: 503 Slow Down");
  const Json items = s.at("items");
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items.at(0).at("name").as_string(), "step-30");
  EXPECT_EQ(items.at(0).at("nodes").size(), 2u);
  EXPECT_EQ(items.at(0).at("bytes").as_integer(), 300) << "the largest a node reports";
  EXPECT_FALSE(items.at(0).at("atOrigin").as_bool());
  EXPECT_EQ(items.at(2).at("name").as_string(), "step-10");
  EXPECT_EQ(items.at(2).at("nodes").at(0).as_string(), "n2");
  EXPECT_TRUE(items.at(2).at("atOrigin").as_bool());
}

TEST(JobCheckpointsTest, KeepsTheNewestFewAndSaysNothingWithoutReports) {
  EXPECT_TRUE(checkpointSummary({}).is_null());
  CheckpointVolumeReport many{.node = "n1"};
  for (int step = 9; step >= 0; --step)
    many.checkpoints.push_back({"step-" + std::to_string(step), 1, 1, false});
  const Json s = checkpointSummary({many});
  EXPECT_EQ(s.at("items").size(), kCheckpointItems);
  EXPECT_EQ(s.at("items").at(0).at("name").as_string(), "step-9");
  EXPECT_FALSE(s.has_field("newestAtOrigin")) << "none is at the origin yet";
  EXPECT_FALSE(s.has_field("lastError"));
}

TEST(JobCheckpointsTest, AFullDiskIsAConditionNamingTheNodeAndTheFix) {
  const Json roomy = checkpointSummary({{.node = "n1", .diskFreeBytes = 40LL << 30}});
  EXPECT_FALSE(roomy.has_field("fullDisks"));
  const Condition fine = checkpointDiskCondition(roomy);
  EXPECT_EQ(fine.type, "CheckpointDiskFull");
  EXPECT_FALSE(fine.status);

  const Json full =
      checkpointSummary({{.node = "n1", .diskFreeBytes = 40LL << 30},
                         {.node = "n2", .diskFull = true, .diskFreeBytes = 12 << 20}});
  ASSERT_EQ(full.at("fullDisks").size(), 1u);
  const Condition c = checkpointDiskCondition(full);
  EXPECT_TRUE(c.status);
  EXPECT_EQ(c.reason, "DiskFull");
  EXPECT_NE(c.message.find("n2 (12 MiB free)"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("ENOSPC"), std::string::npos) << c.message;
  EXPECT_EQ(c.message.find("n1"), std::string::npos) << c.message;
}

TEST(JobCheckpointsTest, EachNodeCopiesToTheNextAroundARing) {
  using Peers = std::map<std::string, std::vector<std::string>>;
  EXPECT_EQ(checkpointPeersOf({"n3", "n1", "n2"}, 1),
            (Peers{{"n1", {"n2"}}, {"n2", {"n3"}}, {"n3", {"n1"}}}));
  EXPECT_EQ(checkpointPeersOf({"n1", "n2", "n3"}, 2),
            (Peers{{"n1", {"n2", "n3"}}, {"n2", {"n3", "n1"}}, {"n3", {"n1", "n2"}}}));
  EXPECT_EQ(checkpointPeersOf({"n1", "n2"}, 3), (Peers{{"n1", {"n2"}}, {"n2", {"n1"}}}))
      << "no more copies than other nodes";
  EXPECT_EQ(checkpointPeersOf({"n1"}, 1), (Peers{{"n1", {}}})) << "alone: no peer";
  EXPECT_EQ(checkpointPeersOf({"n1", "n2"}, 0), (Peers{{"n1", {}}, {"n2", {}}}));
}

TEST(JobCheckpointsTest, ANewWorkersRestoreReadsTheNodesHoldingTheNewestCheckpointFirst) {
  const Json summary = checkpointSummary(
      {{.node = "n1", .checkpoints = {{"step-10", 2, 200, true}}},
       {.node = "n2", .checkpoints = {{"step-20", 2, 200, false}, {"step-10", 2, 200, true}}},
       {.node = "n3", .checkpoints = {{"step-20", 2, 200, false}}}});
  EXPECT_EQ(
      checkpointPeersAttribute(
          summary, {{"n1", "10.0.0.1:7400"}, {"n2", "10.0.0.2:7400"}, {"n3", "10.0.0.3:7400"}}),
      "n2=10.0.0.2:7400,n3=10.0.0.3:7400,n1=10.0.0.1:7400");
  EXPECT_EQ(checkpointPeersAttribute(summary, {{"n1", "10.0.0.1:7400"}}), "n1=10.0.0.1:7400")
      << "a node without a cache node known is left out";
  EXPECT_EQ(checkpointPeersAttribute(Json::null(), {{"n1", "10.0.0.1:7400"}}), "");
}

TEST(JobCheckpointsTest, ANodeHoldingCheckpointsIsLostOnceItIsNoLongerLive) {
  const Json summary = checkpointSummary(
      {{.node = "n1", .checkpoints = {{"step-20", 2, 200, false}}},
       {.node = "n2", .checkpoints = {{"step-20", 2, 200, false}, {"step-10", 2, 200, true}}},
       {.node = "n3", .checkpoints = {{"step-10", 2, 200, true}}}});
  EXPECT_EQ(lostCheckpointNodes(summary, {"n1", "n2", "n3"}), std::vector<std::string>{});
  EXPECT_EQ(lostCheckpointNodes(summary, {"n2", "n4"}), (std::vector<std::string>{"n1", "n3"}));
  EXPECT_EQ(lostCheckpointNodes(Json::null(), {}), std::vector<std::string>{});
}

TEST(JobCheckpointsTest, AFileUriTheNodesRefuseIsACondition) {
  const auto roots = parseOriginRoots({"/srv/ckpt/{namespace}"}, "checkpointOriginRoots");
  ASSERT_TRUE(roots.isOk());
  const auto other = checkpointUriCondition("file:///srv/ckpt/team-a/run/", "team-b", *roots);
  ASSERT_TRUE(other.has_value());
  EXPECT_TRUE(other->status);
  EXPECT_EQ(other->reason, "InOtherNamespacesDirectory");
  EXPECT_TRUE(other->message.starts_with("spec.checkpoints.uri: file:///srv/ckpt/team-a/run/ is "
                                         "refused for namespace team-b"))
      << other->message;
  EXPECT_EQ(checkpointUriCondition("file:///etc/", "team-b", *roots)->reason,
            "OutsideCheckpointRoots");
  EXPECT_EQ(checkpointUriCondition("file:///srv/ckpt/x/", "team-b", {})->reason,
            "NoCheckpointRoots");
  const auto own = checkpointUriCondition("file:///srv/ckpt/team-b/run/", "team-b", *roots);
  ASSERT_TRUE(own.has_value());
  EXPECT_FALSE(own->status);
  EXPECT_FALSE(checkpointUriCondition("s3://runs/x/", "team-b", *roots).has_value())
      << "s3:// is confined by the namespace's own credentials";
}

TEST(JobCheckpointsTest, TheSecondActiveJobOnAUriIsTheOneTold) {
  using namespace std::chrono_literals;
  const auto t0 = std::chrono::system_clock::time_point{} + 1000s;
  const CheckpointsUser bert{.name = "bert", .uri = "u", .created = t0, .active = true};
  const CheckpointsUser gpt{.name = "gpt", .uri = "u", .created = t0 + 1s, .active = true};
  const CheckpointsUser twin{.name = "abc", .uri = "u", .created = t0 + 1s, .active = true};
  EXPECT_EQ(checkpointsSharedWith(gpt, {bert}), "bert");
  EXPECT_EQ(checkpointsSharedWith(bert, {gpt}), std::nullopt) << "the first is left alone";
  EXPECT_EQ(checkpointsSharedWith(gpt, {twin}), "abc") << "created together: by name";
  EXPECT_EQ(checkpointsSharedWith(twin, {gpt}), std::nullopt);
  CheckpointsUser done = bert;
  done.active = false;
  EXPECT_EQ(checkpointsSharedWith(gpt, {done}), std::nullopt) << "a finished job writes no more";
  CheckpointsUser elsewhere = bert;
  elsewhere.uri = "v";
  EXPECT_EQ(checkpointsSharedWith(gpt, {elsewhere}), std::nullopt);
  EXPECT_TRUE(checkpointSharedCondition("u", "bert").status);
  EXPECT_FALSE(checkpointSharedCondition("u", std::nullopt).status);
}

}  // namespace
}  // namespace granary::op
