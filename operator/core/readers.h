// Who reads a Dataset: the TrainingJob workers that mount it through a csi.granary.io inline
// volume, scheduled and not finished, and the TrainingJobs that name it while they wait for
// their datasets before creating any worker (warmPolicy BeforeStart, status.phase Warming). The
// Dataset controller tells the cache nodes about them (SetWarmPlan), so an OnJob dataset starts
// warming once a job is placed or waits for it, and nodes know which pods to expect; with them,
// the dataset's warm priority and its access-order hint. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/kube/object.h"

namespace granary::op {

// A worker pod; or a waiting job, with podName, podUid and node empty and `job` its name.
struct DatasetReader {
  std::string podNamespace, podName, podUid, node;
  int rank = -1;                // the granary.io/rank label; -1 without one
  bool running = false;         // status.phase Running: the job reads now
  std::string accessOrderFile;  // the job's spec.datasets[].accessOrderFile for this dataset
  std::string job;              // a waiting TrainingJob's name; "" for a worker pod

  bool operator==(const DatasetReader&) const = default;
};

// SetWarmPlanRequest.priority, defined here only: when datasets compete for a cache node's warm
// workers and bandwidth, a higher priority warms first. A dataset takes the highest of its
// readers': jobs reading now go before jobs whose workers are placed but not running yet (a gang
// still starting, or restarting) and jobs waiting for warmPolicy BeforeStart (no worker yet),
// which go before datasets nobody reads (OnCreate warming).
enum WarmPriority : int32_t {
  kWarmPriorityNoReaders = 0,
  kWarmPriorityWaitingReaders = 10,
  kWarmPriorityRunningReaders = 20,
};
int32_t warmPriorityOf(const std::vector<DatasetReader>& readers);

// The access-order file to warm by: a running reader's, else any reader's, the first by pod name
// (readers of one job name the same); "" when no reader names one.
std::string accessOrderFileOf(const std::vector<DatasetReader>& readers);

// Names of the datasets `pod` mounts through csi.granary.io inline volumes.
std::vector<std::string> datasetsMountedBy(const kube::Json& pod);

// The readers of dataset `name` among `pods` (of its namespace), ordered by pod name.
std::vector<DatasetReader> readersOf(const std::vector<kube::ObjectPtr>& pods,
                                     const std::string& name);

// Names of the datasets TrainingJob `job` lists in spec.datasets.
std::vector<std::string> datasetsNamedBy(const kube::Json& job);

// The readers of dataset `name` among TrainingJobs `jobs` (of its namespace): each job that
// names it and waits for its datasets (status.phase Warming, not being deleted), with the job's
// accessOrderFile for it; ordered by job name.
std::vector<DatasetReader> waitingReadersOf(const std::vector<kube::ObjectPtr>& jobs,
                                            const std::string& name);

}  // namespace granary::op
