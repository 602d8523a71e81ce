// granary_job_*{namespace, job}: each running TrainingJob's figures from its status, for
// dashboards and alerts that speak of jobs, not pods:
//   granary_job_gpu_utilization_ratio  status.gpu.utilization
//   granary_job_data_wait_ratio        status.data.waitFraction
//   granary_job_data_starved_ratio     status.gpu.dataStarvedFraction
// and an elastic job's membership, from the plans that change it:
//   granary_job_workers_running                 status.elastic.running
//   granary_job_membership_changes_total{kind}  Lost, Joined, GangRestart
//   granary_job_worker_recovery_seconds         a worker's loss to its replacement running
// Thread-safe (the families are).
#pragma once

#include <string>
#include <vector>

#include "common/kube/object.h"
#include "common/metrics.h"

namespace granary::op {

struct JobSeries {
  GaugeFamily gpuUtilization, dataWait, dataStarved;
  GaugeFamily workersRunning;
  CounterFamily membershipChanges;
  HistogramFamily recovery;

  // Sets the job's series from its status; a figure the status lacks has no series.
  void publish(const std::string& ns, const std::string& job, const kube::Json& status) const;
  // Removes the job's telemetry series (it stopped running, or it is gone).
  void remove(const std::string& ns, const std::string& job) const;
  // Removes every series of a job that is gone, its membership's too.
  void forget(const std::string& ns, const std::string& job) const;
  // An elastic job's membership once its status is written: the workers running (the series
  // removed for a job that is not elastic or not running), the changes and recoveries planned.
  void publishMembership(const std::string& ns, const std::string& job, const kube::Json& status,
                         const std::vector<std::string>& changes,
                         const std::vector<double>& recoverySeconds) const;
};

Result<JobSeries> declareJobSeries(MetricsRegistry& registry);

}  // namespace granary::op
