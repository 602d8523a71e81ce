#include "operator/core/job_checkpoints.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace granary::op {
namespace {

using kube::Json;

struct Merged {
  size_t place = SIZE_MAX;  // the best index in any node's newest-first list
  int64_t files = 0, bytes = 0;
  bool atOrigin = false;
  std::set<std::string> nodes;
};

Json strings(const std::set<std::string>& values) {
  Json out = Json::array();
  for (const auto& v : values) out[out.size()] = Json::string(v);
  return out;
}

}  // namespace

Json checkpointSummary(const std::vector<CheckpointVolumeReport>& reports) {
  if (reports.empty()) return Json::null();
  std::map<std::string, Merged> byName;
  int64_t pendingFiles = 0, pendingBytes = 0;
  double lag = 0;
  std::string lastError;
  for (const auto& r : reports) {
    pendingFiles += r.pendingFiles;
    pendingBytes += r.pendingBytes;
    lag = std::max(lag, r.uploadLagSeconds);
    if (lastError.empty() && !r.lastError.empty()) lastError = r.node + ": " + r.lastError;
    for (size_t i = 0; i < r.checkpoints.size(); ++i) {
      const CheckpointOnNode& c = r.checkpoints[i];
      Merged& m = byName[c.name];
      m.place = std::min(m.place, i);
      m.files = std::max(m.files, c.files);
      m.bytes = std::max(m.bytes, c.bytes);
      m.atOrigin = m.atOrigin || c.atOrigin;
      m.nodes.insert(r.node);
    }
  }
  std::vector<std::pair<std::string, const Merged*>> order;
  for (const auto& [name, m] : byName) order.emplace_back(name, &m);
  // Newest first; among equals the name that sorts last (step-20 after step-10).
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->place != b.second->place ? a.second->place < b.second->place
                                              : a.first > b.first;
  });
  Json out = Json::object();
  if (!order.empty()) out["newest"] = Json::string(order.front().first);
  for (const auto& [name, m] : order) {
    if (!m->atOrigin) continue;
    out["newestAtOrigin"] = Json::string(name);
    break;
  }
  out["pendingFiles"] = Json::number(pendingFiles);
  out["pendingBytes"] = Json::number(pendingBytes);
  out["uploadLagSeconds"] = Json::number(std::round(lag * 10) / 10);  // noise rewrites nothing
  if (!lastError.empty()) out["lastError"] = Json::string(lastError);
  Json full = Json::array();
  for (const auto& r : reports) {
    if (!r.diskFull) continue;
    Json node = Json::object();
    node["node"] = Json::string(r.node);
    node["freeBytes"] = Json::number(r.diskFreeBytes);
    full[full.size()] = std::move(node);
  }
  if (full.size() > 0) out["fullDisks"] = std::move(full);
  Json items = Json::array();
  for (size_t i = 0; i < order.size() && i < kCheckpointItems; ++i) {
    const Merged& m = *order[i].second;
    Json item = Json::object();
    item["name"] = Json::string(order[i].first);
    item["files"] = Json::number(m.files);
    item["bytes"] = Json::number(m.bytes);
    item["nodes"] = strings(m.nodes);
    item["atOrigin"] = Json::boolean(m.atOrigin);
    items[items.size()] = std::move(item);
  }
  out["items"] = std::move(items);
  return out;
}

Condition checkpointDiskCondition(const Json& summary) {
  const Json full = kube::pathValue(summary, "fullDisks");
  if (!full.is_array() || full.size() == 0)
    return {kCheckpointDiskFull, false, "DiskHasRoom",
            "every node's checkpoint volume has room for saves"};
  std::string nodes;
  for (const auto& n : full.as_array()) {
    nodes += (nodes.empty() ? "" : ", ") + n.at("node").as_string() + " (" +
             std::to_string(n.at("freeBytes").as_number().to_int64() >> 20) + " MiB free)";
  }
  return {kCheckpointDiskFull, true, "DiskFull",
          "the checkpoint volume's disk is full on " + nodes +
              ": saves there fail with ENOSPC (nothing written before is lost). Keep fewer "
              "checkpoints (rotate sooner), or make room on the node's cache disk: delete "
              "Datasets cached there or lower their cache.capacityPerNode"};
}

std::map<std::string, std::vector<std::string>> checkpointPeersOf(std::set<std::string> nodes,
                                                                  int copies) {
  const std::vector<std::string> ring(nodes.begin(), nodes.end());
  const size_t wanted = std::min<size_t>(copies < 0 ? 0 : static_cast<size_t>(copies),
                                         ring.empty() ? 0 : ring.size() - 1);
  std::map<std::string, std::vector<std::string>> peers;
  for (size_t i = 0; i < ring.size(); ++i) {
    std::vector<std::string>& mine = peers[ring[i]];
    for (size_t k = 1; k <= wanted; ++k) mine.push_back(ring[(i + k) % ring.size()]);
  }
  return peers;
}

namespace {

// The nodes status.checkpoints' items name, in the items' order (newest first), each once.
std::vector<std::string> nodesOf(const Json& summary) {
  std::vector<std::string> out;
  const Json items = kube::pathValue(summary, "items");
  if (!items.is_array()) return out;
  for (const Json& item : items.as_array()) {
    const Json nodes = kube::pathValue(item, "nodes");
    if (!nodes.is_array()) continue;
    for (const Json& node : nodes.as_array())
      if (node.is_string() && std::find(out.begin(), out.end(), node.as_string()) == out.end())
        out.push_back(node.as_string());
  }
  return out;
}

}  // namespace

std::string checkpointPeersAttribute(const Json& summary,
                                     const std::map<std::string, std::string>& addresses) {
  std::string out;
  for (const std::string& node : nodesOf(summary)) {
    const auto address = addresses.find(node);
    if (address == addresses.end() || address->second.empty()) continue;
    out += (out.empty() ? "" : ",") + node + "=" + address->second;
  }
  return out;
}

std::vector<std::string> lostCheckpointNodes(const Json& summary,
                                             const std::set<std::string>& live) {
  std::set<std::string> lost;
  for (const std::string& node : nodesOf(summary))
    if (!live.contains(node)) lost.insert(node);
  return {lost.begin(), lost.end()};
}

std::optional<Condition> checkpointUriCondition(const std::string& uri, const std::string& ns,
                                                const std::vector<OriginRoot>& roots) {
  constexpr std::string_view kFile = "file://";
  if (!uri.starts_with(kFile)) return std::nullopt;
  const Status allowed =
      checkUnderRoots(uri, uri.substr(kFile.size()), ns, roots, "checkpointOriginRoots");
  if (allowed.isOk())
    return Condition{kCheckpointUriRefused, false, "WithinCheckpointRoots",
                     "spec.checkpoints.uri is beneath the cache nodes' checkpointOriginRoots, in "
                     "a directory namespace " +
                         ns + " may write"};
  const std::string reason = allowed.code() == StatusCode::kPermissionDenied
                                 ? "InOtherNamespacesDirectory"
                             : roots.empty() ? "NoCheckpointRoots"
                                             : "OutsideCheckpointRoots";
  return Condition{kCheckpointUriRefused, true, reason,
                   "spec.checkpoints." + allowed.message() +
                       ". The workers' checkpoint volumes fail to mount until then"};
}

std::optional<std::string> checkpointsSharedWith(const CheckpointsUser& job,
                                                 const std::vector<CheckpointsUser>& others) {
  if (!job.active) return std::nullopt;
  const auto before = [](const CheckpointsUser& a, const CheckpointsUser& b) {
    return a.created != b.created ? a.created < b.created : a.name < b.name;
  };
  const CheckpointsUser* first = nullptr;
  for (const auto& other : others) {
    if (other.name == job.name || !other.active || other.uri != job.uri) continue;
    if (!first || before(other, *first)) first = &other;
  }
  if (!first || !before(*first, job)) return std::nullopt;
  return first->name;
}

Condition checkpointSharedCondition(const std::string& uri,
                                    const std::optional<std::string>& sharedWith) {
  if (!sharedWith)
    return {kCheckpointUriShared, false, "OwnUri",
            "no other running TrainingJob of the namespace names spec.checkpoints.uri"};
  return {kCheckpointUriShared, true, "UriOfAnotherJob",
          "spec.checkpoints.uri: " + uri + " is also the checkpoints of TrainingJob " +
              *sharedWith +
              ", which runs: the two jobs overwrite and remove each other's checkpoint files. "
              "Give this job a uri of its own (e.g. a sub-directory named after it), or delete "
              "one of the two"};
}

}  // namespace granary::op
