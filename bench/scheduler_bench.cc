// Gang placement at scale: 5,000 nodes of 8 GPUs, 50 datasets cached on subsets of them,
// 10,000 pods in gangs of 1 to 64. Prints, side by side in one run:
//   - placements per second and p99 placement latency of granary's placement (candidates from
//     the cluster state's index), and of the same placement scoring every node (full scan);
//   - locality achieved ÷ the best possible, for granary and for a locality-blind baseline (the
//     same placement with the locality weight at zero). Locality is counted per GPU, relative
//     to the best node of each job (1 = on a node holding the most of the job's data). The
//     best possible is a max-flow bound: GPUs of each dataset's jobs routed to nodes that cache
//     it, within every node's GPUs; it ignores fragmentation, so it can only flatter the bound;
//   - the GPUs placed off their data, by what the dataset's caching nodes had free when the
//     gang came (too few GPUs; GPUs enough but not room for every worker; room for all).
// Usage: scheduler_bench [nodes] [pods] (defaults 5000 10000).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/resident_memory.h"
#include "common/flags.h"
#include "scheduler/core/cluster_state.h"
#include "scheduler/core/placement.h"

namespace {

using namespace granary::scheduler;
using Steady = std::chrono::steady_clock;

struct Workload {
  std::vector<NodeInfo> nodes;
  std::vector<Gang> gangs;
  int pods = 0;
};

Workload makeWorkload(int nodeCount, int podCount, unsigned seed) {
  std::mt19937 random(seed);
  Workload w;
  for (int i = 0; i < nodeCount; ++i) {
    NodeInfo node;
    node.name = "gpu-" + std::to_string(i);
    node.labels = {{"kubernetes.io/hostname", node.name}, {"zone", "z" + std::to_string(i % 4)}};
    node.allocatable.milliCpu = 192000;
    node.allocatable.memory = int64_t{2048} << 30;
    node.allocatable.ephemeralStorage = int64_t{8} << 40;
    node.allocatable.pods = 110;
    node.allocatable.extended["nvidia.com/gpu"] = 8;
    if (i % 50 == 0) node.taints = {{"nvidia.com/gpu", "maintenance", "NoSchedule"}};
    w.nodes.push_back(std::move(node));
  }
  // 50 datasets, each cached on 200 nodes: small ones whole on every node of their set, large
  // ones sharded across it (two copies of each file).
  std::vector<DatasetCache> datasets;
  for (int d = 0; d < 50; ++d) {
    DatasetCache cache{"ds-" + std::to_string(d), int64_t{1} << 40, {}};
    const bool sharded = d % 2 == 1;
    for (int k = 0; k < 200; ++k) {
      const int node = static_cast<int>(random() % nodeCount);
      cache.cachedBytesByNode[w.nodes[node].name] =
          sharded ? cache.totalBytes / 100 : cache.totalBytes;
    }
    datasets.push_back(std::move(cache));
  }
  std::map<std::string, std::vector<std::string>> cachedDatasets;
  for (const auto& d : datasets) {
    for (const auto& [node, bytes] : d.cachedBytesByNode) cachedDatasets[node].push_back(d.name);
  }
  for (auto& node : w.nodes) node.cachedDatasets = cachedDatasets[node.name];
  const int gpuChoices[] = {1, 2, 2, 4, 8};  // about 85 % of the cluster's GPUs in all
  for (int g = 0; w.pods < podCount; ++g) {
    const int size =
        std::min<int>(podCount - w.pods, g % 3 == 0 ? 1 + static_cast<int>(random() % 64)
                                                    : 1 + static_cast<int>(random() % 8));
    Gang gang;
    gang.key = "ml/job-" + std::to_string(g);
    gang.size = size;
    gang.datasets = {datasets[random() % datasets.size()]};
    const int gpus = gpuChoices[random() % 5];
    for (int i = 0; i < size; ++i) {
      PodInfo pod;
      pod.key = gang.key + "-worker-" + std::to_string(i);
      pod.requests.milliCpu = 8000;
      pod.requests.memory = int64_t{64} << 30;
      pod.requests.pods = 1;
      pod.requests.extended["nvidia.com/gpu"] = gpus;
      gang.pods.push_back(std::move(pod));
    }
    w.pods += size;
    w.gangs.push_back(std::move(gang));
  }
  return w;
}

// Max flow (Dinic) on a small graph: the bound on GPUs that can sit on caching nodes.
class MaxFlow {
 public:
  explicit MaxFlow(int vertices) : adjacency_(vertices), level_(vertices), next_(vertices) {}
  void add(int from, int to, int64_t capacity) {
    adjacency_[from].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({to, capacity});
    adjacency_[to].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({from, 0});
  }
  int64_t run(int source, int sink) {
    int64_t total = 0;
    while (levels(source, sink)) {
      std::fill(next_.begin(), next_.end(), 0);
      while (int64_t pushed = push(source, sink, INT64_MAX)) total += pushed;
    }
    return total;
  }

 private:
  struct Edge {
    int to;
    int64_t capacity;
  };
  bool levels(int source, int sink) {
    std::fill(level_.begin(), level_.end(), -1);
    std::vector<int> queue{source};
    level_[source] = 0;
    for (size_t i = 0; i < queue.size(); ++i) {
      for (int e : adjacency_[queue[i]]) {
        if (edges_[e].capacity > 0 && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[queue[i]] + 1;
          queue.push_back(edges_[e].to);
        }
      }
    }
    return level_[sink] >= 0;
  }
  int64_t push(int v, int sink, int64_t limit) {
    if (v == sink) return limit;
    for (int& i = next_[v]; i < static_cast<int>(adjacency_[v].size()); ++i) {
      const int e = adjacency_[v][i];
      Edge& edge = edges_[e];
      if (edge.capacity <= 0 || level_[edge.to] != level_[v] + 1) continue;
      if (int64_t pushed = push(edge.to, sink, std::min(limit, edge.capacity))) {
        edge.capacity -= pushed;
        edges_[e ^ 1].capacity += pushed;
        return pushed;
      }
    }
    return 0;
  }
  std::vector<std::vector<int>> adjacency_;
  std::vector<Edge> edges_;
  std::vector<int> level_, next_;
};

// GPUs of all jobs that could sit on nodes caching their dataset at all.
int64_t localGpuBound(const Workload& w) {
  std::map<std::string, int> datasetIndex;
  std::map<std::string, int> nodeIndex;
  for (size_t i = 0; i < w.nodes.size(); ++i) nodeIndex[w.nodes[i].name] = static_cast<int>(i);
  std::vector<int64_t> demand;
  std::vector<const DatasetCache*> caches;
  for (const auto& gang : w.gangs) {
    const auto& d = gang.datasets.front();
    auto [it, fresh] = datasetIndex.emplace(d.name, static_cast<int>(demand.size()));
    if (fresh) {
      demand.push_back(0);
      caches.push_back(&d);
    }
    demand[it->second] +=
        gang.pods.front().requests.gpus() * static_cast<int64_t>(gang.pods.size());
  }
  const int source = 0, sink = 1, firstDataset = 2;
  const int firstNode = firstDataset + static_cast<int>(demand.size());
  MaxFlow flow(firstNode + static_cast<int>(w.nodes.size()));
  for (size_t d = 0; d < demand.size(); ++d) {
    flow.add(source, firstDataset + static_cast<int>(d), demand[d]);
    for (const auto& [node, bytes] : caches[d]->cachedBytesByNode) {
      flow.add(firstDataset + static_cast<int>(d), firstNode + nodeIndex[node], INT64_MAX / 4);
    }
  }
  for (size_t n = 0; n < w.nodes.size(); ++n) {
    const bool usable = w.nodes[n].taints.empty();
    flow.add(firstNode + static_cast<int>(n), sink, usable ? w.nodes[n].allocatable.gpus() : 0);
  }
  return flow.run(source, sink);
}

struct RunResult {
  double seconds = 0;
  int placed = 0;
  int unplaced = 0;
  double p99Micros = 0;
  double localGpus = 0;  // GPUs placed, weighted by relative locality (1 on the best node)
  // GPUs placed off their data, by what the dataset's caching nodes (untainted) had free when
  // the gang came: fewer GPUs than it needed; enough GPUs but not room for every worker whole;
  // room for every worker.
  double offFull = 0, offFragmented = 0, offChosen = 0;
};

// What a gang's dataset's untainted caching nodes have free: GPUs, and workers of the gang.
struct CachingRoom {
  int64_t gpus = 0, workers = 0;
};
CachingRoom cachingRoom(const Gang& gang, const std::vector<NodeInfo>& nodes,
                        const std::map<std::string, size_t>& positions) {
  CachingRoom room;
  const int64_t perWorker = gang.pods.front().requests.gpus();
  for (const auto& [name, bytes] : gang.datasets.front().cachedBytesByNode) {
    const NodeInfo& node = nodes[positions.at(name)];
    if (!node.taints.empty()) continue;
    room.gpus += node.free().gpus();
    if (perWorker > 0) room.workers += node.free().gpus() / perWorker;
  }
  return room;
}

// Whether each decision scores candidates from the index (the scheduler's way) or every node.
enum class Scan { kIndexed, kEveryNode };

RunResult run(const Workload& w, const ScoreWeights& weights, Scan scan) {
  ClusterState state;
  for (const auto& node : w.nodes) state.upsertNode(node);
  std::map<std::string, size_t> positions;
  state.read([&](const std::vector<NodeInfo>& nodes) {
    for (size_t i = 0; i < nodes.size(); ++i) positions[nodes[i].name] = i;
  });
  RunResult r;
  std::vector<double> perPodMicros;
  const auto start = Steady::now();
  for (const auto& gang : w.gangs) {
    CachingRoom room;
    state.read(
        [&](const std::vector<NodeInfo>& nodes) { room = cachingRoom(gang, nodes, positions); });
    const auto began = Steady::now();
    GangDecision d;
    if (scan == Scan::kIndexed) {
      state.readIndexed([&](const IndexedNodes& nodes) { d = placeGang(gang, nodes, weights); });
    } else {
      // The same entry point, told to scan every node (with the state's dataset fullness).
      state.readIndexed([&](const IndexedNodes& nodes) {
        d = placeGang(gang, nodes, weights, {.scanBelow = std::numeric_limits<size_t>::max()});
      });
    }
    for (const auto& p : d.placements) state.assume(p.podKey, p.node, gang.pods.front().requests);
    const double micros = std::chrono::duration<double, std::micro>(Steady::now() - began).count();
    perPodMicros.insert(perPodMicros.end(), gang.pods.size(), micros);
    if (d.placed) {
      r.placed += static_cast<int>(gang.pods.size());
      if (d.bestLocality > 0) {
        const double gpus = static_cast<double>(gang.pods.size()) *
                            static_cast<double>(gang.pods.front().requests.gpus());
        const double local = d.locality / d.bestLocality * gpus;
        r.localGpus += local;
        const bool full = static_cast<double>(room.gpus) < gpus;
        const bool fragmented = static_cast<size_t>(room.workers) < gang.pods.size();
        (full ? r.offFull : fragmented ? r.offFragmented : r.offChosen) += gpus - local;
      }
    } else {
      r.unplaced += static_cast<int>(gang.pods.size());
    }
  }
  r.seconds = std::chrono::duration<double>(Steady::now() - start).count();
  std::sort(perPodMicros.begin(), perPodMicros.end());
  r.p99Micros = perPodMicros[std::min(perPodMicros.size() - 1, perPodMicros.size() * 99 / 100)];
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 5000;
  int pods = 10000;
  CLI::App app(
      "Gang placement at scale: throughput, p99 latency and locality, next to a "
      "locality-blind baseline.",
      "scheduler_bench");
  app.add_option("nodes", nodes, "nodes of 8 GPUs")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("pods", pods, "pods, in gangs of 1 to 64")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000'000));
  if (auto code = granary::parseCommandLine(app, argc, argv)) return *code;
  const Workload w = makeWorkload(nodes, pods, 42);
  std::printf(
      "granary scheduler_bench: %d nodes x 8 GPUs, %d pods in %zu gangs of 1-64, "
      "50 datasets on 200 nodes each\n\n",
      nodes, w.pods, w.gangs.size());

  const RunResult granary = run(w, {}, Scan::kIndexed);
  const int64_t granaryPeak = granary::bench::residentMemory().peak;
  const RunResult scan = run(w, {}, Scan::kEveryNode);
  const RunResult blind = run(w, {.locality = 0, .reserve = 0}, Scan::kIndexed);
  std::printf("placement throughput (in-process, one thread)\n");
  const auto line = [](const char* name, const RunResult& r) {
    std::printf(
        "  %-9s %10.0f pods/s   p99 %8.0f us per pod's gang decision   (%d placed, %d not)\n", name,
        r.placed / r.seconds, r.p99Micros, r.placed, r.unplaced);
  };
  line("granary", granary);
  line("full scan", scan);
  line("blind", blind);
  std::printf(
      "  granary scores the nodes caching each job's data, the best-fitting free nodes and a "
      "sample of %zu nodes; full scan scores every node\n",
      std::min<size_t>(w.nodes.size(), sampleSize(w.nodes.size(), {})));
  std::printf(
      "  for scale: kube-scheduler's CI floors are 680 pods/s (plain) and 220 (node affinity)\n\n");
  const double bound = static_cast<double>(localGpuBound(w));
  std::printf(
      "locality achieved / best possible (GPUs on caching nodes, max-flow bound %.0f GPUs)\n",
      bound);
  std::printf("  granary   %10.4f\n", granary.localGpus / bound);
  std::printf("  full scan %10.4f\n", scan.localGpus / bound);
  std::printf("  blind     %10.4f   (locality weight 0)\n", blind.localGpus / bound);
  std::printf(
      "GPUs placed off their data, by what the dataset's caching nodes had free when the gang "
      "came:\n  %-9s %10s %12s %12s\n",
      "", "too few", "fragmented", "room for all");
  for (const auto& [name, r] : {std::pair<const char*, const RunResult&>{"granary", granary},
                                {"full scan", scan},
                                {"blind", blind}})
    std::printf("  %-9s %10.0f %12.0f %12.0f\n", name, r.offFull, r.offFragmented, r.offChosen);
  std::printf("\n");
  std::printf(
      "resident memory of this process after granary's run (the workload, the cluster state and "
      "its index): peak %.0f MiB\n",
      static_cast<double>(granaryPeak) / (1 << 20));
  return granary.placed > 0 ? 0 : 1;
}
