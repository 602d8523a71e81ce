// Builders for scheduler tests: the cluster model's nodes and pods, and gangs of workers.
#pragma once

#include <string>

#include "scheduler/core/model.h"
#include "tests/common/cluster/fixtures.h"

namespace granary::scheduler::testing {

using cluster::testing::gpuNode;
using cluster::testing::resources;
using cluster::testing::worker;

inline Gang gang(const std::string& key, int workers, int64_t gpus) {
  Gang g;
  g.key = key;
  g.size = workers;
  for (int i = 0; i < workers; ++i)
    g.pods.push_back(worker(key + "-worker-" + std::to_string(i), gpus));
  return g;
}

}  // namespace granary::scheduler::testing
