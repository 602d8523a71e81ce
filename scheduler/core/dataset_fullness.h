// How full each dataset's caching nodes are: the GPUs requested on the nodes that cache it, over
// their allocatable GPUs (0..1), counting the nodes open to readers in general (ready,
// schedulable, no NoSchedule or NoExecute taint). Placement keeps a node caching other jobs' data
// for their readers the more, the fuller those datasets' caching nodes already are. Kept by
// ClusterState as nodes and pods change; built from a node list for placement over plain nodes.
// Pure; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/core/model.h"

namespace granary::scheduler {

class DatasetFullness {
 public:
  static DatasetFullness of(const std::vector<NodeInfo>& nodes);

  // A node's GPUs count for each dataset it caches: add() it as it is now, remove() it as it
  // was added before it changes.
  void add(const NodeInfo& node) { count(node, 1); }
  void remove(const NodeInfo& node) { count(node, -1); }

  // 0 for a dataset no node with GPUs caches.
  double at(const std::string& dataset) const;

 private:
  struct Gpus {
    int64_t requested = 0, allocatable = 0;
  };
  void count(const NodeInfo& node, int sign);
  std::unordered_map<std::string, Gpus> byDataset_;
};

}  // namespace granary::scheduler
