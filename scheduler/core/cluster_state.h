// The scheduler's view of the cluster: nodes and the pods on them, bound or assumed.
//
// A placement is assumed as soon as it is made, so the next gang sees its resources taken
// before the binding is observed (no double-booking of GPUs). When the informer shows the pod
// bound, the assumption becomes a fact without counting twice; when the bind fails or the pod
// goes away, its resources return. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/thread_annotations.h"
#include "scheduler/core/model.h"
#include "scheduler/core/node_index.h"

namespace granary::scheduler {

class ClusterState {
 public:
  // Adds or updates a node (allocatable, labels, taints, conditions); what its pods request is
  // kept.
  void upsertNode(NodeInfo node);
  void removeNode(const std::string& name);

  // A pod seen bound to `node` (or still running there). Replaces an assumption for it.
  void observeBound(const std::string& podKey, const std::string& node, const Resources& requests);
  // A pod gone, or finished (its resources are free again).
  void observeGone(const std::string& podKey);

  // A placement made but not yet observed.
  void assume(const std::string& podKey, const std::string& node, const Resources& requests);
  // The bind of an assumed pod failed: release it.
  void forget(const std::string& podKey);
  bool isAssumed(const std::string& podKey) const;

  // Calls `read` with the nodes, under the lock; keep it short.
  void read(const std::function<void(const std::vector<NodeInfo>&)>& read) const;
  // The same with the nodes' indexes, for placement without a scan.
  void readIndexed(const std::function<void(const IndexedNodes&)>& read) const;
  size_t nodeCount() const;
  // The node a pod is on (bound or assumed); "" if none.
  std::string nodeOf(const std::string& podKey) const;

 private:
  struct PodEntry {
    std::string node;
    Resources requests;
    bool assumed = false;
  };
  void addLocked(const std::string& podKey, PodEntry entry) GRANARY_REQUIRES(mutex_);
  void removeLocked(const std::string& podKey) GRANARY_REQUIRES(mutex_);
  // Adds `requests` to the node's requested resources (or takes them away) and refiles it.
  void chargeLocked(const std::string& node, const Resources& requests, bool add)
      GRANARY_REQUIRES(mutex_);

  mutable Mutex mutex_;
  std::vector<NodeInfo> nodes_ GRANARY_GUARDED_BY(mutex_);
  // Node name → position in nodes_.
  std::unordered_map<std::string, size_t> index_ GRANARY_GUARDED_BY(mutex_);
  FreeGpuIndex free_ GRANARY_GUARDED_BY(mutex_);         // positions in nodes_ by free GPUs
  DatasetFullness fullness_ GRANARY_GUARDED_BY(mutex_);  // of every node in nodes_
  std::map<std::string, PodEntry> pods_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::scheduler
