#include "scheduler/core/placement.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "common/cluster/node_checks.h"

namespace granary::scheduler {

DataLocality::DataLocality(const std::vector<DatasetCache>& datasets) {
  double total = 0;
  for (const auto& d : datasets) {
    total += static_cast<double>(d.totalBytes);
    for (const auto& [node, bytes] : d.cachedBytesByNode)
      byNode_[node] += static_cast<double>(bytes);
  }
  if (total <= 0) {
    byNode_.clear();
    return;
  }
  for (auto& [node, bytes] : byNode_) {
    bytes = std::min(1.0, bytes / total);
    best_ = std::max(best_, bytes);
  }
}

double DataLocality::at(const std::string& node) const {
  const auto it = byNode_.find(node);
  return it == byNode_.end() ? 0.0 : it->second;
}

namespace {

double packingOf(const NodeInfo& node, const Resources& request, const Resources& extra) {
  const bool gpu = request.gpus() > 0;
  const double capacity =
      static_cast<double>(gpu ? node.allocatable.gpus() : node.allocatable.milliCpu);
  if (capacity <= 0) return 0;
  const double used =
      static_cast<double>(gpu ? node.requested.gpus() + extra.gpus() + request.gpus()
                              : node.requested.milliCpu + extra.milliCpu + request.milliCpu);
  return std::min(1.0, used / capacity);
}

double spreadOf(const NodeInfo& node, const Resources& extra) {
  const double slots = static_cast<double>(node.allocatable.pods);
  if (slots <= 0) return 0;
  return 1.0 - std::min(1.0, static_cast<double>(node.requested.pods + extra.pods) / slots);
}

// "3 Insufficient nvidia.com/gpu, 2 node(s) were not ready", most frequent first.
std::string summarize(const std::map<std::string, int>& reasons) {
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [reason, count] : reasons) sorted.emplace_back(count, reason);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::string text;
  for (size_t i = 0; i < sorted.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(sorted[i].first) + " " + sorted[i].second;
  }
  return text;
}

constexpr const char* kNoCache = "node(s) did not cache the job's datasets (locality Required)";

}  // namespace

double localityOf(const std::string& node, const std::vector<DatasetCache>& datasets) {
  return DataLocality(datasets).at(node);
}

namespace {

// Placement over the nodes at `positions` (every node when null). Not placed: why, counted over
// the nodes looked at.
GangDecision placeAmong(const Gang& gang, const std::vector<NodeInfo>& nodes,
                        const std::vector<size_t>* positions, const ScoreWeights& weights,
                        const DatasetFullness& fullness) {
  const size_t count = positions ? positions->size() : nodes.size();
  const auto at = [&](size_t k) { return positions ? (*positions)[k] : k; };
  GangDecision decision;
  const int needed = static_cast<int>(gang.pods.size());
  if (needed < gang.size) {
    decision.reason = "waiting for all workers: " + std::to_string(needed) + " of " +
                      std::to_string(gang.size) + " exist";
    return decision;
  }
  if (needed == 0) {
    decision.placed = true;
    return decision;
  }
  const DataLocality locality(gang.datasets);
  decision.bestLocality = locality.best();
  const bool required = gang.locality == api::Locality::kRequired;
  // Locality is scored relative to the best node, so a node holding a 1 % shard of a sharded
  // dataset still outranks any node holding none, whatever the packing says.
  // A node caching other jobs' data is kept for them: never used for this job if it caches none
  // of its data (unless nothing else is left), and among caching nodes the ones whose other
  // datasets have the most room left elsewhere go first.
  const auto readByGang = [&](const std::string& dataset) {
    return std::any_of(gang.datasets.begin(), gang.datasets.end(),
                       [&](const DatasetCache& d) { return d.name == dataset; });
  };
  const auto localityScore = [&](const NodeInfo& node, double value) {
    if (value <= 0) return node.cachedDatasets.empty() ? 0.0 : -weights.reserve;
    double others = 0;
    for (const auto& dataset : node.cachedDatasets)
      if (!readByGang(dataset)) others += fullness.at(dataset);
    return weights.locality * value / decision.bestLocality - weights.reserve * 3 / 4 * others;
  };

  std::map<std::string, int> reasons;
  const bool homogeneous = std::all_of(gang.pods.begin(), gang.pods.end(), [&](const PodInfo& p) {
    return p.sameRequirements(gang.pods.front());
  });

  if (homogeneous) {
    // One pass over the nodes: how many workers each can hold, and its score for the first.
    const PodInfo& pod = gang.pods.front();
    struct Candidate {
      size_t index;
      int64_t capacity;
      double score;
      double locality;
    };
    std::vector<Candidate> candidates;
    int64_t total = 0;
    for (size_t k = 0; k < count; ++k) {
      const size_t i = at(k);
      const NodeInfo& node = nodes[i];
      if (auto reason = checkStatic(node, pod); !reason.empty()) {
        ++reasons[reason];
        continue;
      }
      const double nodeLocality = locality.at(node.name);
      if (required && nodeLocality <= 0) {
        ++reasons[kNoCache];
        continue;
      }
      const int64_t capacity = copiesThatFit(pod.requests, node.free());
      if (capacity <= 0) {
        ++reasons[shortfall(pod.requests, node.free())];
        continue;
      }
      const double score = localityScore(node, nodeLocality) +
                           weights.packing * packingOf(node, pod.requests, {}) +
                           weights.spread * spreadOf(node, {});
      candidates.push_back({i, capacity, score, nodeLocality});
      total += capacity;
    }
    if (total < needed) {
      decision.reason = "0/" + std::to_string(count) + " nodes can take all " +
                        std::to_string(needed) + " workers of " + gang.key + " (room for " +
                        std::to_string(total) + ")" +
                        (reasons.empty() ? "" : "; " + summarize(reasons));
      return decision;
    }
    std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
      return a.score != b.score ? a.score > b.score : nodes[a.index].name < nodes[b.index].name;
    });
    int next = 0;
    for (const auto& c : candidates) {
      for (int64_t k = 0; k < c.capacity && next < needed; ++k, ++next) {
        decision.placements.push_back({gang.pods[next].key, nodes[c.index].name, c.locality});
        decision.locality += c.locality;
      }
      if (next == needed) break;
    }
  } else {
    // Workers differ: place one at a time, counting what this gang already put on each node.
    std::unordered_map<size_t, Resources> extra;
    for (const auto& pod : gang.pods) {
      reasons.clear();
      double bestScore = -1;
      size_t best = nodes.size();
      for (size_t k = 0; k < count; ++k) {
        const size_t i = at(k);
        const NodeInfo& node = nodes[i];
        std::string reason = checkStatic(node, pod);
        const double nodeLocality = locality.at(node.name);
        if (reason.empty() && required && nodeLocality <= 0) reason = kNoCache;
        if (reason.empty()) reason = checkResources(node, pod, extra[i]);
        if (!reason.empty()) {
          ++reasons[reason];
          continue;
        }
        const double score = localityScore(node, nodeLocality) +
                             weights.packing * packingOf(node, pod.requests, extra[i]) +
                             weights.spread * spreadOf(node, extra[i]);
        if (score > bestScore) bestScore = score, best = i;
      }
      if (best == nodes.size()) {
        decision.placements.clear();
        decision.locality = 0;
        decision.reason = "0/" + std::to_string(count) + " nodes can take worker " + pod.key +
                          " of " + gang.key + ": " + summarize(reasons);
        return decision;
      }
      extra[best] += pod.requests;
      const double nodeLocality = locality.at(nodes[best].name);
      decision.placements.push_back({pod.key, nodes[best].name, nodeLocality});
      decision.locality += nodeLocality;
    }
  }
  decision.placed = true;
  decision.locality /= needed;
  return decision;
}

// The positions a placement over the index scores: every node caching the gang's data, the
// best-fitting nodes for its first worker, and a sample of the rest. Sorted, unique.
std::vector<size_t> candidatesFor(const Gang& gang, const IndexedNodes& view,
                                  const CandidateOptions& options) {
  std::vector<size_t> out;
  for (const auto& dataset : gang.datasets)
    for (const auto& [name, bytes] : dataset.cachedBytesByNode)
      if (const auto it = view.positions.find(name); it != view.positions.end())
        out.push_back(it->second);
  const PodInfo& pod = gang.pods.front();
  const int64_t needed = static_cast<int64_t>(gang.pods.size());
  if (const int64_t gpus = pod.requests.gpus(); gpus > 0) {
    int64_t room = 0, visited = 0;
    view.free.forEachFitting(gpus, [&](size_t position) {
      const NodeInfo& node = view.nodes[position];
      if (checkStatic(node, pod).empty()) {
        room += copiesThatFit(pod.requests, node.free());
        out.push_back(position);
      }
      return room < options.fitSlack * needed && ++visited < options.fitVisitLimit;
    });
  }
  const size_t total = view.nodes.size();
  const size_t sample = std::min(total, sampleSize(total, options));
  const size_t start = std::hash<std::string>{}(gang.key) % total;
  for (size_t k = 0; k < sample; ++k) out.push_back((start + k) % total);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

size_t sampleSize(size_t nodes, const CandidateOptions& options) {
  const int64_t adaptive = std::max<int64_t>(5, 50 - static_cast<int64_t>(nodes) / 125);
  const int64_t percent = options.samplePercent > 0 ? options.samplePercent : adaptive;
  return std::max<size_t>(options.minSample, nodes * static_cast<size_t>(percent) / 100);
}

namespace {

GangDecision scanEveryNode(const Gang& gang, const std::vector<NodeInfo>& nodes,
                           const ScoreWeights& weights, const DatasetFullness& fullness) {
  GangDecision decision = placeAmong(gang, nodes, nullptr, weights, fullness);
  decision.scannedEveryNode = true;
  return decision;
}

}  // namespace

GangDecision placeGang(const Gang& gang, const std::vector<NodeInfo>& nodes,
                       const ScoreWeights& weights) {
  return scanEveryNode(gang, nodes, weights, DatasetFullness::of(nodes));
}

GangDecision placeGang(const Gang& gang, const IndexedNodes& view, const ScoreWeights& weights,
                       const CandidateOptions& options) {
  if (view.nodes.empty() || view.nodes.size() < options.scanBelow || gang.pods.empty() ||
      static_cast<int>(gang.pods.size()) < gang.size)
    return scanEveryNode(gang, view.nodes, weights, view.fullness);
  const std::vector<size_t> candidates = candidatesFor(gang, view, options);
  GangDecision decision = placeAmong(gang, view.nodes, &candidates, weights, view.fullness);
  if (decision.placed) return decision;
  // Places what a scan places, with a scan's reasons.
  return scanEveryNode(gang, view.nodes, weights, view.fullness);
}

}  // namespace granary::scheduler
