// What granary-operator reads of each kind of object it caches: its informers store only that,
// so their memory follows the fields read rather than the objects' size (a worker pod carries
// its job's whole template; a Node its images). Every informer of a kind registers the same
// view, since the manager shares one informer per type, namespace and selector.
#pragma once

#include "common/kube/object.h"

namespace granary::op {

// TrainingJob worker pods: identity, labels and annotations (rank, attempt, access order),
// placement, the dataset volumes, and the phase, conditions and container states.
kube::Json workerPodView(kube::Json pod);
// granary-cache-node pods: identity, annotations (capacity), node, ports, IP and readiness.
kube::Json agentPodView(kube::Json pod);
// Nodes: labels, taints, schedulability, allocatable and conditions.
kube::Json nodeView(kube::Json node);
// Workers' headless Services: whether one exists.
kube::Json serviceView(kube::Json service);
// Datasets and TrainingJobs are written back whole (finalizers, status), so they keep every
// field but metadata.managedFields, which the API server keeps when a write omits it.
kube::Json withoutManagedFields(kube::Json object);

}  // namespace granary::op
