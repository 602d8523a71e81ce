#include "operator/core/dataset_status.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "common/quantity.h"
#include "operator/core/conditions.h"

namespace granary::op {

using kube::Json;

namespace {

struct Totals {
  int64_t totalFiles = 0, totalBytes = 0, ownedBytes = 0, cachedFiles = 0, cachedBytes = 0;
  int64_t originBytes = 0, hits = 0, misses = 0, etaSeconds = 0;
  double bytesPerSecond = 0;
  bool etaKnown = true;
  std::optional<std::chrono::system_clock::time_point> warmStart;
};

Totals add(const std::vector<NodeReport>& reports) {
  Totals t;
  for (const auto& r : reports) {
    if (!r.progress) continue;
    const NodeProgress& p = *r.progress;
    t.totalFiles = std::max(t.totalFiles, p.totalFiles);
    t.totalBytes = std::max(t.totalBytes, p.totalBytes);
    t.ownedBytes += p.ownedBytes;
    t.cachedFiles += p.cachedFiles;
    t.cachedBytes += p.cachedBytes;
    t.originBytes += p.originBytes;
    t.hits += p.chunkHits;
    t.misses += p.chunkMisses;
    t.bytesPerSecond += p.bytesPerSecond;
    if (p.phase != DatasetPhase::kReady) {
      // A node that does not warm (OnDemand, QuotaFull) never finishes: no ETA.
      if (p.etaSeconds < 0 || p.phase == DatasetPhase::kOnDemand ||
          p.phase == DatasetPhase::kQuotaFull)
        t.etaKnown = false;
      t.etaSeconds = std::max(t.etaSeconds, p.etaSeconds);
    }
    if (p.warmStart && (!t.warmStart || *p.warmStart < *t.warmStart)) t.warmStart = p.warmStart;
  }
  return t;
}

// Nodes `previous` lists for this generation that are not in the plan any more.
std::vector<std::string> lostNodes(const DatasetProgress& o, const Json& previous) {
  const Json generation = kube::pathValue(previous, "observedGeneration");
  const Json listed = kube::pathValue(previous, "nodes");
  if (!generation.is_integer() || generation.as_number().to_int64() != o.generation ||
      !listed.is_array())
    return {};
  std::set<std::string> planned;
  for (const auto& r : o.reports) planned.insert(r.nodeName);
  std::vector<std::string> lost;
  for (const auto& n : listed.as_array())
    if (n.has_string_field("name") && !planned.count(n.at("name").as_string()))
      lost.push_back(n.at("name").as_string());
  return lost;
}

struct PhaseAndWhy {
  DatasetPhase phase;
  std::string reason, message;
};

// The names of the nodes reporting `phase`, comma-separated.
std::string nodesIn(const DatasetProgress& o, DatasetPhase phase) {
  std::string names;
  for (const auto& r : o.reports)
    if (r.progress && r.progress->phase == phase) names += (names.empty() ? "" : ", ") + r.nodeName;
  return names;
}

std::string quotaFullMessage(const DatasetProgress& o, const std::string& cached) {
  const std::string quota =
      o.cache.capacityPerNode
          ? "spec.cache.capacityPerNode (" + formatByteSize(*o.cache.capacityPerNode) + ")"
          : "the node's default quota (spec.cache.capacityPerNode unset)";
  std::string detail;
  for (const auto& r : o.reports)
    if (r.progress && r.progress->phase == DatasetPhase::kQuotaFull && !r.progress->message.empty())
      detail += "; " + r.nodeName + ": " + r.progress->message;
  return "the Pin quota " + quota + " filled on " + nodesIn(o, DatasetPhase::kQuotaFull) +
         " before its share was cached; " + cached +
         " cached, the rest is read from the origin. Raise spec.cache.capacityPerNode, add "
         "cache nodes, or set spec.cache.policy: LRU" +
         detail;
}

std::string onDemandMessage(const DatasetProgress& o, const std::string& cached) {
  const std::string filled = "files are cached as they are read (" + cached + " cached)";
  switch (o.cache.warm) {
    case api::WarmPolicy::kNever:
      return "spec.cache.warm is Never: " + filled +
             ". Set spec.cache.warm: OnCreate to warm the whole dataset";
    case api::WarmPolicy::kOnJob:
      return "spec.cache.warm is OnJob and no TrainingJob that mounts it is placed yet: " + filled +
             ". It warms once a job's worker is placed; set spec.cache.warm: OnCreate to warm it "
             "now";
    case api::WarmPolicy::kOnCreate:
      break;
  }
  return nodesIn(o, DatasetPhase::kOnDemand) + " not warming: " + filled;
}

PhaseAndWhy phaseOf(const DatasetProgress& o, const std::vector<std::string>& lostNodes,
                    const Totals& totals, const std::string& cached) {
  if (o.reports.empty())
    return {DatasetPhase::kPending, "NoCacheNodes", "no cache node may hold this dataset"};
  for (const auto& r : o.reports)
    if (r.progress && r.progress->phase == DatasetPhase::kFailed)
      return {DatasetPhase::kFailed, "NodeFailed", r.nodeName + ": " + r.progress->message};
  for (const auto& r : o.reports)
    if (!r.progress)
      return {DatasetPhase::kDegraded, "NodeUnreachable", r.nodeName + ": " + r.error};
  for (const auto& r : o.reports)
    if (r.progress->phase == DatasetPhase::kDegraded)
      return {DatasetPhase::kDegraded, "NodeDegraded", r.nodeName + ": " + r.progress->message};
  bool ready = true, listing = false, warming = false, quotaFull = false;
  for (const auto& r : o.reports) {
    const DatasetPhase p = r.progress->phase;
    ready = ready && p == DatasetPhase::kReady;
    listing = listing || p == DatasetPhase::kPending || p == DatasetPhase::kListing;
    warming = warming || p == DatasetPhase::kWarming;
    quotaFull = quotaFull || p == DatasetPhase::kQuotaFull;
  }
  const std::string where =
      " on " + std::to_string(o.reports.size()) + (o.reports.size() == 1 ? " node" : " nodes");
  const std::string ofTotal = cached + " of " + formatByteSize({totals.totalBytes});
  if (ready && !(o.replanned && !lostNodes.empty()))
    return {DatasetPhase::kReady, "Cached", ofTotal + " cached" + where};
  if (!lostNodes.empty()) {
    std::string lost;
    for (const auto& n : lostNodes) lost += (lost.empty() ? "" : ", ") + n;
    return {DatasetPhase::kDegraded, "NodeLost",
            "cache node(s) " + lost + " gone; their share is warming again" + where};
  }
  if (quotaFull) return {DatasetPhase::kQuotaFull, "CacheQuotaFull", quotaFullMessage(o, ofTotal)};
  for (const auto& r : o.reports)  // a node says what it awaits before it lists again
    if (r.progress->phase == DatasetPhase::kPending && !r.progress->message.empty())
      return {DatasetPhase::kPending, "OriginUnavailable", r.nodeName + ": " + r.progress->message};
  if (listing)
    return {DatasetPhase::kListing, "Listing",
            "listing the origin" + where + "; the files listed so far can be read"};
  if (warming) return {DatasetPhase::kWarming, "Warming", ofTotal + " cached" + where};
  return {DatasetPhase::kOnDemand, "NotWarmedByPolicy", onDemandMessage(o, ofTotal)};
}

std::string percentage(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

// The ReadersCutOff message for the pods the nodes report, "" for none: the first few by name,
// with their nodes, and what to do.
std::string cutOffMessage(const std::vector<NodeReport>& reports) {
  constexpr size_t kNamed = 5;
  std::vector<std::string> pods;
  for (const auto& r : reports)
    if (r.progress)
      for (const auto& pod : r.progress->cutOff)
        pods.push_back(pod.podNamespace + "/" + pod.podName + " on " + r.nodeName);
  if (pods.empty()) return "";
  std::sort(pods.begin(), pods.end());
  std::string named;
  for (size_t i = 0; i < std::min(pods.size(), kNamed); ++i) named += (i ? ", " : "") + pods[i];
  if (pods.size() > kNamed) named += " and " + std::to_string(pods.size() - kNamed) + " more";
  return std::to_string(pods.size()) + (pods.size() == 1 ? " pod lost its" : " pods lost their") +
         " view of this dataset when granary's cache node was replaced without handing over (or "
         "killed): " +
         named +
         ". Their reads fail (\"Transport endpoint is not connected\") until "
         "they are restarted: restart them; the operator restarts TrainingJob workers itself";
}

}  // namespace

Json datasetStatus(const DatasetProgress& o, const Json& previous,
                   std::chrono::system_clock::time_point now) {
  const Totals t = add(o.reports);
  const int64_t copies = std::max<int64_t>(
      1, std::min<int64_t>(o.cache.replicas, static_cast<int64_t>(o.reports.size())));
  const double fraction =
      t.ownedBytes > 0 ? static_cast<double>(t.cachedBytes) / static_cast<double>(t.ownedBytes)
                       : 0.0;
  const std::string cached = percentage(fraction);
  const std::vector<std::string> lost = lostNodes(o, previous);
  const auto [phase, reason, message] = phaseOf(o, lost, t, cached);
  const bool ready = phase == DatasetPhase::kReady;

  Json status = Json::object();
  status["phase"] = Json::string(std::string(api::datasetPhaseName(phase)));
  status["observedGeneration"] = Json::number(o.generation);
  status["totalBytes"] = Json::number(t.totalBytes);
  status["totalSize"] = Json::string(formatByteSize({t.totalBytes}));
  status["totalFiles"] = Json::number(t.totalFiles);
  // What the nodes hold on disk, in every phase (the copies of replicas counted once).
  status["cachedBytes"] = Json::number(std::min(t.totalBytes, t.cachedBytes / copies));
  status["cachedFiles"] = Json::number(std::min(t.totalFiles, t.cachedFiles / copies));
  status["cachedPercentage"] = Json::string(cached);
  status["originBytesRead"] = Json::number(t.originBytes);
  status["hitRatio"] = Json::number(
      t.hits + t.misses > 0 ? static_cast<double>(t.hits) / static_cast<double>(t.hits + t.misses)
                            : 0.0);
  Json warm = Json::object();
  if (t.warmStart) warm["startTime"] = Json::string(kube::metav1Time(*t.warmStart));
  warm["bytesPerSecond"] = Json::number(ready ? 0 : static_cast<int64_t>(t.bytesPerSecond));
  if (ready || t.etaKnown) warm["etaSeconds"] = Json::number(ready ? int64_t{0} : t.etaSeconds);
  status["warm"] = std::move(warm);
  Json nodes = Json::array();
  const auto addNode = [&](const std::string& name, const NodeProgress* p) {
    Json n = Json::object();
    n["name"] = Json::string(name);
    n["cachedBytes"] = Json::number(p ? p->cachedBytes : int64_t{0});
    n["capacityBytes"] = Json::number(p ? p->capacityBytes : int64_t{0});
    n["ready"] = Json::boolean(p && p->phase == DatasetPhase::kReady);
    nodes[nodes.size()] = std::move(n);
  };
  for (const auto& r : o.reports) addNode(r.nodeName, r.progress ? &*r.progress : nullptr);
  // Lost nodes stay listed until the share they held is warm again elsewhere.
  if (!ready)
    for (const auto& name : lost) addNode(name, nullptr);
  status["nodes"] = std::move(nodes);
  Json conditions = kube::pathValue(previous, "conditions");
  const std::string cutOff = cutOffMessage(o.reports);
  setCondition(
      conditions,
      {"Ready", ready, reason,
       cutOff.empty() ? message : message + "; some pods lost their view: see ReadersCutOff"},
      o.generation, now);
  if (!cutOff.empty()) {
    setCondition(conditions, {"ReadersCutOff", true, "MountEnded", cutOff}, o.generation, now);
  } else if (conditionOf(previous, "ReadersCutOff").status) {
    setCondition(conditions,
                 {"ReadersCutOff", false, "NoneCutOff",
                  "every pod that lost its view of this dataset was restarted or ended"},
                 o.generation, now);
  }
  status["conditions"] = std::move(conditions);
  return status;
}

Json problemStatus(const Json& previous, int64_t generation, DatasetPhase phase,
                   const std::string& reason, const std::string& message,
                   std::chrono::system_clock::time_point now) {
  Json status = previous.is_object() ? previous : Json::object();
  status["phase"] = Json::string(std::string(api::datasetPhaseName(phase)));
  status["observedGeneration"] = Json::number(generation);
  Json conditions = kube::pathValue(previous, "conditions");
  setCondition(conditions, {"Ready", false, reason, message}, generation, now);
  status["conditions"] = std::move(conditions);
  return status;
}

std::set<std::string> nodesListedIn(const Json& status) {
  std::set<std::string> listed;
  if (!status.has_array_field("nodes")) return listed;
  for (const auto& n : status.at("nodes").as_array())
    if (n.has_string_field("name")) listed.insert(n.at("name").as_string());
  return listed;
}

std::optional<DatasetPhase> phaseOfStatus(const Json& status) {
  const Json phase = kube::pathValue(status, "phase");
  return phase.is_string() ? api::datasetPhaseOf(phase.as_string()) : std::nullopt;
}

}  // namespace granary::op
