#include "common/cluster/kube_model.h"

namespace granary::cluster {
namespace {

using kube::Json;

std::string stringAt(const Json& object, const std::string& path) {
  const Json value = kube::pathValue(object, path);
  return value.is_string() ? value.as_string() : "";
}

// Adds a resource map ({"cpu": "500m", "memory": "1Gi", ...}) to `into`.
Status addResourceMap(Resources& into, const Json& map, const std::string& where) {
  if (!map.is_object()) return Status::ok();
  for (const auto& [name, value] : map.as_object()) {
    const std::string text = value.is_string() ? value.as_string() : value.serialize();
    GRANARY_RETURN_IF_ERROR(addQuantity(into, name, text).withContext(where));
  }
  return Status::ok();
}

api::NodeSelectorRequirement requirementFrom(const Json& r) {
  api::NodeSelectorRequirement out;
  out.key = r.has_string_field("key") ? r.at("key").as_string() : "";
  out.op = r.has_string_field("operator") ? r.at("operator").as_string() : "";
  if (r.has_array_field("values")) {
    for (const auto& v : r.at("values").as_array()) {
      if (v.is_string()) out.values.push_back(v.as_string());
    }
  }
  return out;
}

}  // namespace

Result<PodInfo> podInfoFrom(const Json& pod) {
  PodInfo info;
  info.key = kube::objectKey(pod);
  info.uid = kube::uidOf(pod);
  const Json spec = kube::pathValue(pod, "spec");
  Resources containers, largestInit, overhead;
  if (spec.has_array_field("containers")) {
    for (const auto& c : spec.at("containers").as_array()) {
      GRANARY_RETURN_IF_ERROR(addResourceMap(containers, kube::pathValue(c, "resources.requests"),
                                             info.key + " spec.containers resources.requests"));
    }
  }
  if (spec.has_array_field("initContainers")) {
    for (const auto& c : spec.at("initContainers").as_array()) {
      Resources one;
      GRANARY_RETURN_IF_ERROR(addResourceMap(one, kube::pathValue(c, "resources.requests"),
                                             info.key + " spec.initContainers resources.requests"));
      largestInit.milliCpu = std::max(largestInit.milliCpu, one.milliCpu);
      largestInit.memory = std::max(largestInit.memory, one.memory);
      largestInit.ephemeralStorage = std::max(largestInit.ephemeralStorage, one.ephemeralStorage);
      for (const auto& [name, amount] : one.extended) {
        largestInit.extended[name] = std::max(largestInit.extendedOf(name), amount);
      }
    }
  }
  GRANARY_RETURN_IF_ERROR(
      addResourceMap(overhead, kube::pathValue(spec, "overhead"), info.key + " spec.overhead"));
  info.requests = effectiveRequests(containers, largestInit, overhead);

  if (spec.has_object_field("nodeSelector")) {
    for (const auto& [key, value] : spec.at("nodeSelector").as_object()) {
      if (value.is_string()) info.nodeSelector[key] = value.as_string();
    }
  }
  const Json terms = kube::pathValue(
      spec,
      "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
  if (terms.is_array()) {
    for (const auto& t : terms.as_array()) {
      api::NodeSelectorTerm term;
      if (t.has_array_field("matchExpressions")) {
        for (const auto& r : t.at("matchExpressions").as_array())
          term.matchExpressions.push_back(requirementFrom(r));
      }
      if (t.has_array_field("matchFields")) {
        for (const auto& r : t.at("matchFields").as_array())
          term.matchFields.push_back(requirementFrom(r));
      }
      info.requiredTerms.push_back(std::move(term));
    }
  }
  if (spec.has_array_field("tolerations")) {
    for (const auto& t : spec.at("tolerations").as_array()) {
      api::Toleration toleration;
      toleration.key = stringAt(t, "key");
      toleration.op = t.has_string_field("operator") ? t.at("operator").as_string() : "Equal";
      toleration.value = stringAt(t, "value");
      toleration.effect = stringAt(t, "effect");
      info.tolerations.push_back(std::move(toleration));
    }
  }
  return info;
}

NodeInfo nodeInfoFrom(const Json& node) {
  NodeInfo info;
  info.name = kube::nameOf(node);
  info.labels = kube::stringMap(node);
  const Json taints = kube::pathValue(node, "spec.taints");
  if (taints.is_array()) {
    for (const auto& t : taints.as_array()) {
      info.taints.push_back({stringAt(t, "key"), stringAt(t, "value"), stringAt(t, "effect")});
    }
  }
  const Json unschedulable = kube::pathValue(node, "spec.unschedulable");
  info.unschedulable = unschedulable.is_boolean() && unschedulable.as_bool();
  // A node with a malformed allocatable entry offers nothing of that resource.
  (void)addResourceMap(info.allocatable, kube::pathValue(node, "status.allocatable"), info.name);
  info.ready = false;
  const Json conditions = kube::pathValue(node, "status.conditions");
  if (conditions.is_array()) {
    for (const auto& c : conditions.as_array()) {
      if (stringAt(c, "type") == "Ready") info.ready = stringAt(c, "status") == "True";
    }
  }
  return info;
}

DatasetCache datasetCacheFrom(const Json& dataset) {
  DatasetCache cache;
  cache.name = kube::nameOf(dataset);
  const Json total = kube::pathValue(dataset, "status.totalBytes");
  if (total.is_number()) cache.totalBytes = total.as_number().to_int64();
  const Json nodes = kube::pathValue(dataset, "status.nodes");
  if (nodes.is_array()) {
    for (const auto& n : nodes.as_array()) {
      const Json bytes = kube::pathValue(n, "cachedBytes");
      if (n.has_string_field("name") && bytes.is_number() && bytes.as_number().to_int64() > 0) {
        cache.cachedBytesByNode[n.at("name").as_string()] = bytes.as_number().to_int64();
      }
    }
  }
  return cache;
}

std::optional<DatasetCache> checkpointCacheFrom(const Json& job) {
  const Json items = kube::pathValue(job, "status.checkpoints.items");
  if (!items.is_array() || items.size() == 0) return std::nullopt;
  const Json& newest = items.at(0);
  const Json bytes = kube::pathValue(newest, "bytes");
  const Json nodes = kube::pathValue(newest, "nodes");
  if (!bytes.is_number() || bytes.as_number().to_int64() <= 0 || !nodes.is_array())
    return std::nullopt;
  DatasetCache cache{.name = "checkpoints:" + kube::nameOf(job),
                     .totalBytes = bytes.as_number().to_int64()};
  for (const auto& node : nodes.as_array())
    if (node.is_string()) cache.cachedBytesByNode[node.as_string()] = cache.totalBytes;
  if (cache.cachedBytesByNode.empty()) return std::nullopt;
  return cache;
}

bool isTerminal(const Json& pod) {
  const std::string phase = stringAt(pod, "status.phase");
  return phase == "Succeeded" || phase == "Failed";
}

std::string nodeNameOf(const Json& pod) { return stringAt(pod, "spec.nodeName"); }
std::string schedulerNameOf(const Json& pod) { return stringAt(pod, "spec.schedulerName"); }

}  // namespace granary::cluster
