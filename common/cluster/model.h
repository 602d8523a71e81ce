// Nodes, pods and cached datasets as both the scheduler (placement) and the operator (which
// nodes may hold a dataset) read them: plain structs, filled by the Kubernetes adapter
// (common/cluster/kube_model.h) or by tests and benchmarks.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/api/scheduling.h"
#include "common/cluster/resources.h"

namespace granary::cluster {

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule | PreferNoSchedule | NoExecute
};

struct NodeInfo {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  Resources allocatable;
  Resources requested;  // pods bound or assumed on the node
  bool ready = true;
  bool unschedulable = false;
  // The datasets (DatasetCache::name) with data cached on the node, any job's.
  std::vector<std::string> cachedDatasets;

  Resources free() const {
    Resources f = allocatable;
    f -= requested;
    return f;
  }
};

// The scheduling requirements of one pod.
struct PodInfo {
  std::string key;  // namespace/name
  std::string uid;
  Resources requests;  // effectiveRequests(): pods = 1
  std::map<std::string, std::string> nodeSelector;
  std::vector<api::NodeSelectorTerm> requiredTerms;  // ORed, as in requiredDuringScheduling...
  std::vector<api::Toleration> tolerations;

  // Pods with equal requirements are placed alike (a gang's workers share a template).
  bool sameRequirements(const PodInfo& other) const;
};

// Where a dataset is cached: bytes per node, from the Dataset's status.
struct DatasetCache {
  std::string name;
  int64_t totalBytes = 0;
  std::map<std::string, int64_t> cachedBytesByNode;
};

}  // namespace granary::cluster
