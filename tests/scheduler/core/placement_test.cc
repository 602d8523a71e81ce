#include "scheduler/core/placement.h"

#include <gtest/gtest.h>

#include <set>

#include "scheduler/core/cluster_state.h"
#include "tests/scheduler/core/fixtures.h"

namespace granary::scheduler {
namespace {

using testing::gang;
using testing::gpuNode;

std::set<std::string> nodesOf(const GangDecision& d) {
  std::set<std::string> out;
  for (const auto& p : d.placements) out.insert(p.node);
  return out;
}

DatasetCache cachedOn(std::vector<std::string> nodes, int64_t total = 1000) {
  DatasetCache d{"imagenet", total, {}};
  for (const auto& n : nodes) d.cachedBytesByNode[n] = total / static_cast<int64_t>(nodes.size());
  return d;
}

TEST(Placement, PrefersNodesThatCacheTheData) {
  std::vector<NodeInfo> nodes;
  for (int i = 0; i < 6; ++i) nodes.push_back(gpuNode("n" + std::to_string(i)));
  Gang g = gang("ml/resnet", 2, 8);
  g.datasets = {cachedOn({"n3", "n5"})};
  const auto d = placeGang(g, nodes);
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(nodesOf(d), (std::set<std::string>{"n3", "n5"}));
  EXPECT_DOUBLE_EQ(d.locality, 0.5);
  EXPECT_DOUBLE_EQ(d.bestLocality, 0.5);
}

TEST(Placement, LocalityIsBytesWeightedAcrossDatasets) {
  std::vector<DatasetCache> datasets = {{"big", 900, {{"n1", 900}}}, {"small", 100, {{"n2", 100}}}};
  EXPECT_DOUBLE_EQ(localityOf("n1", datasets), 0.9);
  EXPECT_DOUBLE_EQ(localityOf("n2", datasets), 0.1);
  EXPECT_DOUBLE_EQ(localityOf("n3", datasets), 0.0);
  EXPECT_DOUBLE_EQ(localityOf("n1", {}), 0.0);
}

TEST(Placement, RequiredLocalityRefusesOtherNodesWithAReason) {
  std::vector<NodeInfo> nodes = {gpuNode("n1"), gpuNode("n2"), gpuNode("n3")};
  Gang g = gang("ml/clip", 2, 8);
  g.locality = api::Locality::kRequired;
  g.datasets = {cachedOn({"n1"})};
  const auto d = placeGang(g, nodes);
  EXPECT_FALSE(d.placed);
  EXPECT_TRUE(d.placements.empty());
  EXPECT_EQ(d.reason,
            "0/3 nodes can take all 2 workers of ml/clip (room for 1); 2 node(s) did "
            "not cache the job's datasets (locality Required)");
}

TEST(Placement, LeavesNodesThatCacheOtherJobsDataToThem) {
  std::vector<NodeInfo> nodes = {gpuNode("cache-of-others"), gpuNode("plain")};
  nodes[0].cachedDatasets = {"ml/other"};
  nodes[0].requested = testing::resources(8000, 64, 4, 1);  // packing alone would pick it
  const auto d = placeGang(gang("ml/nodata", 1, 4), nodes);
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.placements[0].node, "plain");
}

// Both nodes cache the job's data and one other dataset each: the node whose other dataset has
// the most room left on its other caching nodes goes first, whatever packing says.
TEST(Placement, AmongCachingNodesKeepsThoseOfDatasetsWithLittleRoomLeft) {
  std::vector<NodeInfo> nodes = {gpuNode("with-busy"), gpuNode("with-idle"),
                                 gpuNode("busy-elsewhere"), gpuNode("idle-elsewhere")};
  nodes[0].cachedDatasets = {"imagenet", "ml/busy"};
  nodes[0].requested = testing::resources(8000, 64, 4, 1);  // packing alone would pick it
  nodes[1].cachedDatasets = {"imagenet", "ml/idle"};
  nodes[2].cachedDatasets = {"ml/busy"};
  nodes[2].requested = testing::resources(64000, 512, 8, 8);  // every GPU taken
  nodes[3].cachedDatasets = {"ml/idle"};
  Gang g = gang("ml/resnet", 1, 4);
  g.datasets = {cachedOn({"with-busy", "with-idle"})};
  const auto d = placeGang(g, nodes);
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.placements[0].node, "with-idle");

  nodes[2].requested = {};  // room for ml/busy's readers elsewhere: packing decides again
  const auto packed = placeGang(g, nodes);
  ASSERT_TRUE(packed.placed);
  EXPECT_EQ(packed.placements[0].node, "with-busy");
}

TEST(DatasetFullness, IsTheShareOfGpusRequestedOnTheNodesCachingADataset) {
  std::vector<NodeInfo> nodes = {gpuNode("a"), gpuNode("b"), gpuNode("c"), gpuNode("tainted")};
  nodes[3].cachedDatasets = {"ml/x", "ml/y"};  // not open to readers: not counted
  nodes[3].taints = {{"nvidia.com/gpu", "maintenance", "NoSchedule"}};
  nodes[0].cachedDatasets = {"ml/x"};
  nodes[0].requested = testing::resources(8000, 64, 6, 1);
  nodes[1].cachedDatasets = {"ml/x", "ml/y"};
  nodes[1].requested = testing::resources(8000, 64, 2, 1);
  DatasetFullness fullness = DatasetFullness::of(nodes);
  EXPECT_DOUBLE_EQ(fullness.at("ml/x"), 0.5);   // 8 of 16
  EXPECT_DOUBLE_EQ(fullness.at("ml/y"), 0.25);  // 2 of 8
  EXPECT_DOUBLE_EQ(fullness.at("ml/none"), 0);
  fullness.remove(nodes[1]);
  nodes[1].requested = testing::resources(8000, 64, 8, 1);
  fullness.add(nodes[1]);
  EXPECT_DOUBLE_EQ(fullness.at("ml/x"), 14.0 / 16);
  fullness.remove(nodes[0]);
  fullness.remove(nodes[1]);
  EXPECT_DOUBLE_EQ(fullness.at("ml/x"), 0);
}

TEST(Placement, PacksPartlyUsedNodesFirstKeepingWholeNodesFree) {
  std::vector<NodeInfo> nodes = {gpuNode("empty-a"), gpuNode("half"), gpuNode("empty-b")};
  nodes[1].requested = testing::resources(8000, 64, 4, 1);
  const auto d = placeGang(gang("ml/small", 1, 4), nodes);
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.placements[0].node, "half");
}

TEST(Placement, SpreadingOnlyBreaksTies) {
  std::vector<NodeInfo> nodes = {gpuNode("busy"), gpuNode("quiet")};
  nodes[0].requested.pods = 50;  // CPU-only pods: no GPU difference
  const auto d = placeGang(gang("ml/one", 1, 8), nodes);
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.placements[0].node, "quiet");
}

TEST(Placement, AllWorkersOrNone) {
  std::vector<NodeInfo> nodes = {gpuNode("n1"), gpuNode("n2"), gpuNode("n3")};
  nodes[2].ready = false;
  const auto d = placeGang(gang("ml/big", 3, 8), nodes);
  EXPECT_FALSE(d.placed);
  EXPECT_TRUE(d.placements.empty()) << "no partial placement";
  EXPECT_EQ(d.reason,
            "0/3 nodes can take all 3 workers of ml/big (room for 2); 1 node(s) were not ready");
}

TEST(Placement, FragmentedGpusDoNotFitWholeWorkers) {
  // 16 GPUs free in total, but no node has 8 of them together.
  std::vector<NodeInfo> nodes;
  for (int i = 0; i < 4; ++i) {
    nodes.push_back(gpuNode("n" + std::to_string(i)));
    nodes.back().requested = testing::resources(1000, 8, 4, 1);
  }
  auto d = placeGang(gang("ml/frag", 2, 8), nodes);
  EXPECT_FALSE(d.placed);
  EXPECT_NE(d.reason.find("4 Insufficient nvidia.com/gpu"), std::string::npos) << d.reason;
  // Workers of 4 GPUs fit, one on each node.
  d = placeGang(gang("ml/frag", 4, 4), nodes);
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(nodesOf(d).size(), 4u);
}

TEST(Placement, SeveralWorkersShareANodeWhenTheyFit) {
  std::vector<NodeInfo> nodes = {gpuNode("n1"), gpuNode("n2")};
  const auto d = placeGang(gang("ml/pairs", 4, 4), nodes);
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(nodesOf(d).size(), 2u);
}

TEST(Placement, WaitsForEveryWorker) {
  Gang g = gang("ml/partial", 2, 8);
  g.size = 4;
  const auto d = placeGang(g, {gpuNode("n1"), gpuNode("n2"), gpuNode("n3"), gpuNode("n4")});
  EXPECT_FALSE(d.placed);
  EXPECT_EQ(d.reason, "waiting for all workers: 2 of 4 exist");
}

TEST(Placement, HeterogeneousWorkersArePlacedOneByOne) {
  Gang g = gang("ml/mixed", 2, 8);
  g.pods[1].requests.extended["nvidia.com/gpu"] = 2;
  g.pods[1].nodeSelector = {{"kubernetes.io/hostname", "n2"}};
  const auto d = placeGang(g, {gpuNode("n1"), gpuNode("n2")});
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(d.placements[1].node, "n2");

  g.pods[1].nodeSelector = {{"kubernetes.io/hostname", "n9"}};
  const auto none = placeGang(g, {gpuNode("n1"), gpuNode("n2")});
  EXPECT_FALSE(none.placed);
  EXPECT_TRUE(none.placements.empty());
  EXPECT_EQ(none.reason,
            "0/2 nodes can take worker ml/mixed-worker-1 of ml/mixed: 2 node(s) "
            "didn't match Pod's node affinity/selector");
}

TEST(ClusterState, AssumedPlacementsAreNotDoubleBooked) {
  ClusterState state;
  state.upsertNode(gpuNode("only"));
  const auto place = [&](const Gang& g) {
    GangDecision d;
    state.read([&](const std::vector<NodeInfo>& nodes) { d = placeGang(g, nodes); });
    for (const auto& p : d.placements) state.assume(p.podKey, p.node, g.pods.front().requests);
    return d;
  };
  ASSERT_TRUE(place(gang("ml/a", 1, 8)).placed);
  EXPECT_TRUE(state.isAssumed("ml/a-worker-0"));
  EXPECT_FALSE(place(gang("ml/b", 1, 8)).placed) << "the GPUs are taken until the bind settles";

  // The bind of a fails: its GPUs come back.
  state.forget("ml/a-worker-0");
  EXPECT_TRUE(place(gang("ml/b", 1, 8)).placed);

  // b is observed bound: no double count, and deleting it frees the node.
  state.observeBound("ml/b-worker-0", "only", gang("ml/b", 1, 8).pods[0].requests);
  EXPECT_FALSE(state.isAssumed("ml/b-worker-0"));
  state.read([](const std::vector<NodeInfo>& nodes) { EXPECT_EQ(nodes[0].requested.gpus(), 8); });
  state.observeGone("ml/b-worker-0");
  state.read([](const std::vector<NodeInfo>& nodes) { EXPECT_EQ(nodes[0].requested.gpus(), 0); });
}

TEST(ClusterState, ANodeVanishingMidGangIsNotUsed) {
  ClusterState state;
  state.upsertNode(gpuNode("n1"));
  state.upsertNode(gpuNode("n2"));
  state.upsertNode(gpuNode("n3"));
  state.assume("ml/a-worker-0", "n2", gang("ml/a", 1, 8).pods[0].requests);
  state.removeNode("n2");
  GangDecision d;
  state.read([&](const std::vector<NodeInfo>& nodes) { d = placeGang(gang("ml/b", 3, 8), nodes); });
  EXPECT_FALSE(d.placed);
  EXPECT_EQ(d.reason, "0/2 nodes can take all 3 workers of ml/b (room for 2)");
  // The node returns with its pods still accounted for.
  state.upsertNode(gpuNode("n2"));
  state.read([](const std::vector<NodeInfo>& nodes) {
    for (const auto& n : nodes) EXPECT_EQ(n.requested.gpus(), n.name == "n2" ? 8 : 0) << n.name;
  });
}

}  // namespace
}  // namespace granary::scheduler
