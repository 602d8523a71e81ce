#include "operator/cache_node_discovery.h"

#include <map>
#include <utility>

#include "common/cluster/kube_model.h"
#include "common/names.h"
#include "common/quantity.h"
#include "operator/object_views.h"

namespace granary::op {

using kube::Json;

namespace {

int grpcPortOf(const Json& pod) {
  const Json containers = kube::pathValue(pod, "spec.containers");
  if (!containers.is_array()) return names::kCacheNodeGrpcPort;
  for (const auto& c : containers.as_array()) {
    if (!c.has_array_field("ports")) continue;
    for (const auto& p : c.at("ports").as_array()) {
      if (p.has_string_field("name") && p.at("name").as_string() == names::kCacheNodeGrpcPortName &&
          p.has_integer_field("containerPort"))
        return p.at("containerPort").as_integer();
    }
  }
  return names::kCacheNodeGrpcPort;
}

bool podReady(const Json& pod) {
  if (!kube::pathValue(pod, "metadata.deletionTimestamp").is_null()) return false;
  const Json conditions = kube::pathValue(pod, "status.conditions");
  if (!conditions.is_array()) return false;
  for (const auto& c : conditions.as_array()) {
    if (c.has_string_field("type") && c.at("type").as_string() == "Ready")
      return c.has_string_field("status") && c.at("status").as_string() == "True";
  }
  return false;
}

}  // namespace

std::vector<CacheNode> discoverCacheNodes(const std::vector<kube::ObjectPtr>& agentPods,
                                          const kube::Store& nodes) {
  std::vector<CacheNode> out;
  std::map<std::string, std::pair<size_t, std::string>> chosen;  // node: (index, pod created)
  for (const auto& pod : agentPods) {
    const std::string nodeName = cluster::nodeNameOf(*pod);
    const Json ip = kube::pathValue(*pod, "status.podIP");
    if (nodeName.empty() || !ip.is_string() || ip.as_string().empty()) continue;
    CacheNode node;
    if (auto object = nodes.get(nodeName)) {
      node.node = cluster::nodeInfoFrom(*object);
    } else {
      node.node.name = nodeName;
      node.node.ready = false;
    }
    const std::string host = ip.as_string();
    node.address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                   std::to_string(grpcPortOf(*pod));
    node.agentReady = podReady(*pod);
    const auto annotations = kube::stringMap(*pod, "annotations");
    if (auto it = annotations.find(names::kCacheCapacityAnnotation); it != annotations.end()) {
      if (auto size = parseByteSize(it->second); size.isOk()) node.capacityBytes = size->bytes;
    }
    // Two pods on one node while one replaces the other: the ready one, else the newer.
    const Json created = kube::pathValue(*pod, "metadata.creationTimestamp");
    const std::string createdAt = created.is_string() ? created.as_string() : "";
    const auto [it, first] = chosen.try_emplace(nodeName, out.size(), createdAt);
    if (first) {
      out.push_back(std::move(node));
      continue;
    }
    CacheNode& held = out[it->second.first];
    if (std::pair(node.agentReady, createdAt) > std::pair(held.agentReady, it->second.second)) {
      held = std::move(node);
      it->second.second = createdAt;
    }
  }
  return out;
}

CacheNodeDirectory::CacheNodeDirectory(kube::Manager& manager, const std::string& ns,
                                       const std::string& selector)
    : agents_(&manager.informer({.type = kube::resources::pods(),
                                 .ns = ns,
                                 .labelSelector = selector,
                                 .transform = agentPodView})),
      kubeNodes_(&manager.informer({.type = kube::resources::nodes(), .transform = nodeView})) {
  // Handlers run after the store changed: a discovery that began before the bump runs again.
  const auto changed = [this] { changes_.fetch_add(1); };
  const kube::EventHandler bump{
      .onAdd = [changed](const kube::ObjectPtr&) { changed(); },
      .onUpdate = [changed](const kube::ObjectPtr&, const kube::ObjectPtr&) { changed(); },
      .onDelete = [changed](const kube::ObjectPtr&) { changed(); }};
  agents_->addHandler(bump);
  kubeNodes_->addHandler(bump);
}

CacheNodes CacheNodeDirectory::nodes() {
  MutexLock lock(mutex_);
  const uint64_t changes = changes_.load();
  if (discoveredAt_ != changes) {
    nodes_ = std::make_shared<const std::vector<CacheNode>>(
        discoverCacheNodes(agents_->store().list(), kubeNodes_->store()));
    discoveredAt_ = changes;
  }
  return nodes_;
}

}  // namespace granary::op
