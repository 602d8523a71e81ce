// Builders of nodes and pods for tests of the cluster model and of placement.
#pragma once

#include <string>

#include "common/cluster/model.h"

namespace granary::cluster::testing {

inline Resources resources(int64_t milliCpu, int64_t memoryGi, int64_t gpus, int64_t pods = 110) {
  Resources r;
  r.milliCpu = milliCpu;
  r.memory = memoryGi << 30;
  r.ephemeralStorage = int64_t{100} << 30;
  r.pods = pods;
  if (gpus) r.extended["nvidia.com/gpu"] = gpus;
  return r;
}

inline NodeInfo gpuNode(const std::string& name, int64_t gpus = 8) {
  NodeInfo node;
  node.name = name;
  node.labels = {{"kubernetes.io/hostname", name}};
  node.allocatable = resources(64000, 512, gpus);
  return node;
}

inline PodInfo worker(const std::string& key, int64_t gpus = 8) {
  PodInfo pod;
  pod.key = key;
  pod.requests = resources(8000, 64, gpus, 1);
  pod.requests.ephemeralStorage = 0;
  return pod;
}

}  // namespace granary::cluster::testing
