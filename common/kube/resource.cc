#include "common/kube/resource.h"

#include "common/names.h"

namespace granary::kube {

namespace resources {
const ResourceType& pods() {
  static const ResourceType t{"", "v1", "pods", "Pod", true};
  return t;
}
const ResourceType& nodes() {
  static const ResourceType t{"", "v1", "nodes", "Node", false};
  return t;
}
const ResourceType& services() {
  static const ResourceType t{"", "v1", "services", "Service", true};
  return t;
}
const ResourceType& events() {
  static const ResourceType t{"", "v1", "events", "Event", true};
  return t;
}
const ResourceType& secrets() {
  static const ResourceType t{"", "v1", "secrets", "Secret", true};
  return t;
}
const ResourceType& namespaces() {
  static const ResourceType t{"", "v1", "namespaces", "Namespace", false};
  return t;
}
const ResourceType& leases() {
  static const ResourceType t{"coordination.k8s.io", "v1", "leases", "Lease", true};
  return t;
}
const ResourceType& customResourceDefinitions() {
  static const ResourceType t{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                              "CustomResourceDefinition", false};
  return t;
}
const ResourceType& datasets() {
  static const ResourceType t{names::kApiGroup, names::kApiVersion, "datasets", names::kDatasetKind,
                              true};
  return t;
}
const ResourceType& trainingJobs() {
  static const ResourceType t{names::kApiGroup, names::kApiVersion, "trainingjobs",
                              names::kTrainingJobKind, true};
  return t;
}
}  // namespace resources

std::string resourcePath(const ResourceType& type, std::string_view ns, std::string_view name,
                         std::string_view subresource) {
  std::string path =
      type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
  if (type.namespaced && !ns.empty()) {
    path += "/namespaces/";
    path += ns;
  }
  path += "/" + type.plural;
  if (!name.empty()) {
    path += "/";
    path += name;
    if (!subresource.empty()) {
      path += "/";
      path += subresource;
    }
  }
  return path;
}

}  // namespace granary::kube
