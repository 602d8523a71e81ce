// Kubernetes resource types and the REST paths that address them. Pure.
#pragma once

#include <string>
#include <string_view>

namespace granary::kube {

// A resource type: pods in core/v1, trainingjobs in granary.io/v1alpha1, ...
struct ResourceType {
  std::string group;    // "" for the core group
  std::string version;  // "v1", "v1alpha1"
  std::string plural;   // "pods", "datasets"
  std::string kind;     // "Pod", "Dataset"
  bool namespaced = true;

  std::string apiVersion() const { return group.empty() ? version : group + "/" + version; }
  friend bool operator==(const ResourceType&, const ResourceType&) = default;
};

// The resource types granary uses.
namespace resources {
const ResourceType& pods();
const ResourceType& nodes();
const ResourceType& services();
const ResourceType& events();
const ResourceType& secrets();
const ResourceType& namespaces();
const ResourceType& leases();
const ResourceType& customResourceDefinitions();
const ResourceType& datasets();
const ResourceType& trainingJobs();
}  // namespace resources

// "/api/v1/namespaces/ml/pods/w-0" and friends. `ns` is ignored for cluster-scoped types; an
// empty `ns` on a namespaced type addresses all namespaces (lists and watches). `name` and
// `subresource` may be empty.
std::string resourcePath(const ResourceType& type, std::string_view ns, std::string_view name = {},
                         std::string_view subresource = {});

}  // namespace granary::kube
