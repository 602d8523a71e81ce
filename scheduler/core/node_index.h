// Nodes by free GPUs, kept as the cluster changes, so that placement finds the best-fitting nodes
// for a gang without scanning the cluster. Nodes that cache no dataset are kept apart from those
// that do (placement keeps the latter for their own jobs' readers). Pure; not thread-safe: the
// ClusterState that owns it locks.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scheduler/core/dataset_fullness.h"
#include "scheduler/core/model.h"

namespace granary::scheduler {

class FreeGpuIndex {
 public:
  // Files the node at `position` by what it has free now; call after every change of its
  // allocatable, requested or cached datasets.
  void update(size_t position, const NodeInfo& node);
  // Forgets the node at `position`.
  void erase(size_t position);

  // Calls `visit` with the positions of nodes with at least `gpus` free GPUs: fewest free first
  // (the best fit), every node that caches no dataset before any that does, until `visit`
  // returns false.
  void forEachFitting(int64_t gpus, const std::function<bool(size_t)>& visit) const;

  size_t size() const { return plain_.size() + caching_.size(); }

 private:
  using Entry = std::pair<int64_t, size_t>;  // free GPUs, position
  struct Filed {
    bool caching = false;
    int64_t free = 0;
    bool present = false;
  };
  std::set<Entry> plain_, caching_;
  std::vector<Filed> filed_;  // by position
};

// The nodes as placement reads them: by position, by name, and by free GPUs.
struct IndexedNodes {
  const std::vector<NodeInfo>& nodes;
  const std::unordered_map<std::string, size_t>& positions;  // by node name
  const FreeGpuIndex& free;
  const DatasetFullness& fullness;
};

}  // namespace granary::scheduler
