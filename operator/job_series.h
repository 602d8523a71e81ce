// granary_job_*{namespace, job}: each running TrainingJob's figures from its status, for
// dashboards and alerts that speak of jobs, not pods:
//   granary_job_gpu_utilization_ratio  status.gpu.utilization
//   granary_job_data_wait_ratio        status.data.waitFraction
//   granary_job_data_starved_ratio     status.gpu.dataStarvedFraction
// Thread-safe (the families are).
#pragma once

#include <string>

#include "common/kube/object.h"
#include "common/metrics.h"

namespace granary::op {

struct JobSeries {
  GaugeFamily gpuUtilization, dataWait, dataStarved;

  // Sets the job's series from its status; a figure the status lacks has no series.
  void publish(const std::string& ns, const std::string& job, const kube::Json& status) const;
  // Removes the job's series (it stopped running, or it is gone).
  void remove(const std::string& ns, const std::string& job) const;
};

Result<JobSeries> declareJobSeries(MetricsRegistry& registry);

}  // namespace granary::op
