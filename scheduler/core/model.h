// What placement reads: the cluster model of common/cluster (nodes, pods, cached datasets)
// and the gangs the scheduler places. Plain structs, filled by the scheduler's Kubernetes side
// or by tests and benchmarks.
#pragma once

#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "common/cluster/model.h"
#include "common/cluster/resources.h"

namespace granary::scheduler {

using cluster::DatasetCache;
using cluster::NodeInfo;
using cluster::PodInfo;
using cluster::Resources;
using cluster::Taint;

// All workers of one TrainingJob, placed together or not at all.
struct Gang {
  std::string key;  // namespace/job
  int size = 1;     // workers the job expects
  api::Locality locality = api::Locality::kPreferred;
  std::vector<PodInfo> pods;           // members waiting for a node
  std::vector<DatasetCache> datasets;  // the job's datasets
};

}  // namespace granary::scheduler
