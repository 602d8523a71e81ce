// Finds the cache nodes: the granary-cache-node pods (from an informer of them) and the Nodes
// they run on. A pod's API address is its pod IP and the container port named "grpc"
// (default names::kCacheNodeGrpcPort, 7400); it may advertise its cache space in the annotation
// granary.io/cache-capacity (a quantity, e.g. "800Gi"). Both names are in common/names.h.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/kube/manager.h"
#include "common/kube/store.h"
#include "common/thread_annotations.h"
#include "operator/core/node_set.h"

namespace granary::op {

// One CacheNode per node with a scheduled agent pod with an IP: where a pod replaces another
// (a surge rollout runs both for a moment), the ready one, else the newer. A node without a Node
// object is not ready.
std::vector<CacheNode> discoverCacheNodes(const std::vector<kube::ObjectPtr>& agentPods,
                                          const kube::Store& nodes);

using CacheNodes = std::shared_ptr<const std::vector<CacheNode>>;

// The cache nodes as the informers last saw them, discovered again only after an agent pod or
// a Node changed: a reconcile reads them without parsing every pod and Node of the cluster.
class CacheNodeDirectory {
 public:
  // Registers the informers of the agent pods (in `ns`, "" for all, matching `selector`) and of
  // the Nodes with `manager`.
  CacheNodeDirectory(kube::Manager& manager, const std::string& ns, const std::string& selector);

  // Never null. Reflects every change the informers had delivered when it was called.
  CacheNodes nodes();
  kube::Informer& agents() { return *agents_; }

 private:
  kube::Informer* agents_;
  kube::Informer* kubeNodes_;
  std::atomic<uint64_t> changes_{1};  // bumped by the informers' handlers
  Mutex mutex_;
  uint64_t discoveredAt_ GRANARY_GUARDED_BY(mutex_) = 0;
  CacheNodes nodes_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::op
