// Placement over the cluster state's index against the scan of every node, on random clusters
// (node counts, GPU sizes, taints, selectors, datasets, gang sizes, mixed workers): the index
// places every gang the scan places, its placements pass every filter and fit, and its locality
// is never more than 1 % below the scan's. Each gang is decided by both on the same state; the
// scan's placements are then applied, so the next gang meets the same state in both.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "common/cluster/node_checks.h"
#include "scheduler/core/cluster_state.h"
#include "scheduler/core/placement.h"
#include "tests/scheduler/core/fixtures.h"

namespace granary::scheduler {
namespace {

using testing::gpuNode;
using testing::worker;

struct RandomCluster {
  std::vector<NodeInfo> nodes;
  std::vector<DatasetCache> datasets;
};

RandomCluster randomCluster(std::mt19937& random) {
  RandomCluster c;
  const int count = 20 + static_cast<int>(random() % 400);
  for (int i = 0; i < count; ++i) {
    NodeInfo node = gpuNode("n" + std::to_string(i), std::array{4, 8, 8, 16}[random() % 4]);
    node.labels["pool"] = random() % 3 == 0 ? "a" : "b";
    if (random() % 10 == 0) node.taints = {{"nvidia.com/gpu", "maintenance", "NoSchedule"}};
    if (random() % 40 == 0) node.ready = false;
    c.nodes.push_back(std::move(node));
  }
  std::map<std::string, std::vector<std::string>> cached;
  for (int d = 0, datasets = 1 + static_cast<int>(random() % 8); d < datasets; ++d) {
    DatasetCache cache{"ds-" + std::to_string(d), 1000, {}};
    const bool sharded = random() % 2 == 0;
    for (int k = 0, on = 1 + static_cast<int>(random() % (count / 4 + 1)); k < on; ++k) {
      const std::string& name = c.nodes[random() % count].name;
      cache.cachedBytesByNode[name] = sharded ? 1000 / on + 1 : 1000;
    }
    for (const auto& [name, bytes] : cache.cachedBytesByNode) cached[name].push_back(cache.name);
    c.datasets.push_back(std::move(cache));
  }
  for (auto& node : c.nodes) node.cachedDatasets = cached[node.name];
  return c;
}

Gang randomGang(std::mt19937& random, const RandomCluster& c, int number) {
  Gang g;
  g.key = "ml/job-" + std::to_string(number);
  g.size = 1 + static_cast<int>(random() % (random() % 4 == 0 ? 24 : 4));
  g.locality = random() % 5 == 0 ? api::Locality::kRequired : api::Locality::kPreferred;
  if (random() % 4 != 0) g.datasets = {c.datasets[random() % c.datasets.size()]};
  const int64_t gpus = std::array{0, 1, 2, 4, 8}[random() % 5];
  const bool mixed = random() % 6 == 0;
  const bool selective = random() % 5 == 0;
  const bool tolerant = random() % 8 == 0;
  for (int i = 0; i < g.size; ++i) {
    PodInfo pod = worker(g.key + "-worker-" + std::to_string(i), mixed ? (i % 2) * gpus : gpus);
    if (selective) pod.nodeSelector = {{"pool", "a"}};
    if (tolerant) pod.tolerations = {{.key = "nvidia.com/gpu", .op = "Exists"}};
    g.pods.push_back(std::move(pod));
  }
  return g;
}

// Every placement passes the node's filters, and each node holds what the gang put on it.
void expectFeasible(const GangDecision& d, const Gang& g, const ClusterState& state) {
  std::map<std::string, Resources> added;
  std::map<std::string, const PodInfo*> pods;
  for (const auto& pod : g.pods) pods[pod.key] = &pod;
  state.read([&](const std::vector<NodeInfo>& nodes) {
    for (const auto& p : d.placements) {
      const auto node = std::find_if(nodes.begin(), nodes.end(),
                                     [&](const NodeInfo& n) { return n.name == p.node; });
      ASSERT_NE(node, nodes.end()) << p.node;
      const PodInfo& pod = *pods.at(p.podKey);
      EXPECT_EQ(cluster::checkStatic(*node, pod), "") << g.key << " on " << p.node;
      EXPECT_EQ(cluster::checkResources(*node, pod, added[p.node]), "") << g.key << " " << p.node;
      added[p.node] += pod.requests;
    }
  });
}

TEST(IndexedPlacement, PlacesWhatTheScanPlacesWithinOnePercentOfItsLocality) {
  // Candidates on every cluster, however small, with a small sample: the index does the work.
  const CandidateOptions options{.scanBelow = 0, .samplePercent = 5, .minSample = 4};
  int decisions = 0, scannedAfterCandidates = 0, fromCandidates = 0;
  for (unsigned seed = 1; seed <= 60; ++seed) {
    std::mt19937 random(seed);
    const RandomCluster cluster = randomCluster(random);
    ClusterState state;
    for (const auto& node : cluster.nodes) state.upsertNode(node);
    for (int n = 0; n < 120; ++n) {
      const Gang g = randomGang(random, cluster, n);
      GangDecision scan, indexed;
      state.read([&](const std::vector<NodeInfo>& nodes) { scan = placeGang(g, nodes); });
      state.readIndexed(
          [&](const IndexedNodes& nodes) { indexed = placeGang(g, nodes, {}, options); });
      ++decisions;
      if (scan.placed) {
        ASSERT_TRUE(indexed.placed) << "seed " << seed << " " << g.key << ": " << indexed.reason;
        EXPECT_GE(indexed.locality, scan.locality * 0.99 - 1e-9) << "seed " << seed << " " << g.key;
        expectFeasible(indexed, g, state);
        fromCandidates += indexed.scannedEveryNode ? 0 : 1;
      } else {
        EXPECT_FALSE(indexed.placed) << "seed " << seed << " " << g.key;
        EXPECT_EQ(indexed.reason, scan.reason) << "the scan's reason";
        ++scannedAfterCandidates;
      }
      std::map<std::string, const PodInfo*> pods;
      for (const auto& pod : g.pods) pods[pod.key] = &pod;
      for (const auto& p : scan.placements)
        state.assume(p.podKey, p.node, pods[p.podKey]->requests);
      if (random() % 5 == 0 && !scan.placements.empty())  // a pod ends: its resources return
        state.observeGone(scan.placements.front().podKey);
    }
  }
  std::printf("%d decisions: %d placed from candidates, %d not placed by either\n", decisions,
              fromCandidates, scannedAfterCandidates);
  EXPECT_GT(fromCandidates, (decisions - scannedAfterCandidates) * 3 / 4)
      << "most placements came from the candidates, not the scan";
}

// The index follows every change of the state: nodes added, updated, removed (the last moving
// into the gap), pods assumed, bound, forgotten and gone.
TEST(IndexedPlacement, TheIndexFollowsTheClusterState) {
  ClusterState state;
  for (int i = 0; i < 4; ++i) state.upsertNode(gpuNode("n" + std::to_string(i)));
  const auto fitting = [&](int64_t gpus) {
    std::vector<std::string> names;
    state.readIndexed([&](const IndexedNodes& view) {
      view.free.forEachFitting(gpus, [&](size_t position) {
        names.push_back(view.nodes[position].name);
        return true;
      });
    });
    return names;
  };
  state.assume("ml/a", "n2", worker("ml/a", 6).requests);
  state.observeBound("ml/b", "n1", worker("ml/b", 4).requests);
  EXPECT_EQ(fitting(2), (std::vector<std::string>{"n2", "n1", "n0", "n3"})) << "best fit first";
  EXPECT_EQ(fitting(4), (std::vector<std::string>{"n1", "n0", "n3"}));
  NodeInfo caching = gpuNode("n0");
  caching.cachedDatasets = {"ml/other"};
  state.upsertNode(caching);
  EXPECT_EQ(fitting(8), (std::vector<std::string>{"n3", "n0"})) << "caching nodes last";
  state.removeNode("n1");  // n3 moves into its place
  EXPECT_EQ(fitting(1), (std::vector<std::string>{"n2", "n3", "n0"}));
  state.forget("ml/a");
  state.upsertNode(gpuNode("n5", 2));
  EXPECT_EQ(fitting(2), (std::vector<std::string>{"n5", "n3", "n2", "n0"})) << "ties by position";
  state.observeGone("ml/b");
  state.observeBound("ml/c", "n5", worker("ml/c", 2).requests);
  EXPECT_EQ(fitting(1), (std::vector<std::string>{"n3", "n2", "n0"}));
}

}  // namespace
}  // namespace granary::scheduler
