// Builders for scheduler tests.
#pragma once

#include <string>

#include "scheduler/core/model.h"

namespace granary::scheduler::testing {

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

inline Gang gang(const std::string& key, int workers, int64_t gpus) {
  Gang g;
  g.key = key;
  g.size = workers;
  for (int i = 0; i < workers; ++i)
    g.pods.push_back(worker(key + "-worker-" + std::to_string(i), gpus));
  return g;
}

}  // namespace granary::scheduler::testing
