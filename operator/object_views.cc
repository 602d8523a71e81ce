#include "operator/object_views.h"

namespace granary::op {

using kube::Json;

Json workerPodView(Json pod) {
  return kube::projection(
      pod, {"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion",
            "metadata.labels", "metadata.annotations", "metadata.creationTimestamp",
            "metadata.deletionTimestamp", "spec.nodeName", "spec.volumes", "status.phase",
            "status.reason", "status.conditions", "status.containerStatuses"});
}

Json agentPodView(Json pod) {
  return kube::projection(
      pod, {"metadata.name", "metadata.namespace", "metadata.uid", "metadata.resourceVersion",
            "metadata.labels", "metadata.annotations", "metadata.creationTimestamp",
            "metadata.deletionTimestamp", "spec.nodeName", "spec.containers", "status.podIP",
            "status.conditions"});
}

Json nodeView(Json node) {
  return kube::projection(
      node, {"metadata.name", "metadata.uid", "metadata.resourceVersion", "metadata.labels",
             "spec.taints", "spec.unschedulable", "status.allocatable", "status.conditions"});
}

Json serviceView(Json service) {
  return kube::projection(service, {"metadata.name", "metadata.namespace", "metadata.uid",
                                    "metadata.resourceVersion", "metadata.labels"});
}

Json withoutManagedFields(Json object) {
  if (object.has_object_field("metadata")) kube::eraseField(object["metadata"], "managedFields");
  return object;
}

}  // namespace granary::op
