// Finds the cache nodes: the granary-cache-node pods (from an informer of them) and the Nodes
// they run on. A pod's API address is its pod IP and the container port named "grpc"
// (default names::kCacheNodeGrpcPort, 7400); it may advertise its cache space in the annotation
// granary.io/cache-capacity (a quantity, e.g. "800Gi"). Both names are in common/names.h.
#pragma once

#include <string>
#include <vector>

#include "common/kube/store.h"
#include "operator/core/node_set.h"

namespace granary::op {

// One CacheNode per scheduled agent pod with an IP; a node without a Node object is not ready.
std::vector<CacheNode> discoverCacheNodes(const std::vector<kube::ObjectPtr>& agentPods,
                                          const kube::Store& nodes);

}  // namespace granary::op
