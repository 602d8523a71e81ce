#include "operator/job_series.h"

#include "common/api/membership.h"

namespace granary::op {
namespace {

MetricSpec jobGauge(std::string name, std::string help) {
  return {.name = std::move(name),
          .type = MetricType::kGauge,
          .unit = MetricUnit::kRatio,
          .help = std::move(help),
          .labels = {"namespace", "job"}};
}

void setOrRemove(const GaugeFamily& family, const std::vector<std::string>& labels,
                 const kube::Json& value) {
  if (value.is_number())
    family.with(labels).set(value.as_double());
  else
    family.remove(labels);
}

}  // namespace

void JobSeries::publish(const std::string& ns, const std::string& job,
                        const kube::Json& status) const {
  const std::vector<std::string> labels = {ns, job};
  setOrRemove(gpuUtilization, labels, kube::pathValue(status, "gpu.utilization"));
  setOrRemove(dataWait, labels, kube::pathValue(status, "data.waitFraction"));
  setOrRemove(dataStarved, labels, kube::pathValue(status, "gpu.dataStarvedFraction"));
}

void JobSeries::remove(const std::string& ns, const std::string& job) const {
  for (const GaugeFamily* family : {&gpuUtilization, &dataWait, &dataStarved})
    family->remove({ns, job});
}

void JobSeries::forget(const std::string& ns, const std::string& job) const {
  remove(ns, job);
  workersRunning.remove({ns, job});
  for (const auto kind : {api::MembershipChange::Kind::kLost, api::MembershipChange::Kind::kJoined,
                          api::MembershipChange::Kind::kGangRestart})
    membershipChanges.remove({ns, job, std::string(api::membershipKindName(kind))});
}

void JobSeries::publishMembership(const std::string& ns, const std::string& job,
                                  const kube::Json& status, const std::vector<std::string>& changes,
                                  const std::vector<double>& recoverySeconds) const {
  const kube::Json phase = kube::pathValue(status, "phase");
  if (phase.is_string() && phase.as_string() == "Running")
    setOrRemove(workersRunning, {ns, job}, kube::pathValue(status, "elastic.running"));
  else
    workersRunning.remove({ns, job});
  for (const auto& kind : changes) membershipChanges.with({ns, job, kind}).increment();
  for (double seconds : recoverySeconds) recovery.with({ns}).observe(seconds);
}

Result<JobSeries> declareJobSeries(MetricsRegistry& registry) {
  GRANARY_ASSIGN_OR_RETURN(
      auto utilization,
      registry.addGauge(jobGauge("granary_job_gpu_utilization_ratio",
                                 "Mean utilization of a running TrainingJob's GPUs over its last "
                                 "telemetry window (status.gpu.utilization).")));
  GRANARY_ASSIGN_OR_RETURN(
      auto wait, registry.addGauge(jobGauge("granary_job_data_wait_ratio",
                                            "Share of the last telemetry window a running "
                                            "TrainingJob's workers were blocked on data "
                                            "(status.data.waitFraction).")));
  GRANARY_ASSIGN_OR_RETURN(
      auto starved,
      registry.addGauge(jobGauge("granary_job_data_starved_ratio",
                                 "Mean share of the last telemetry window a running "
                                 "TrainingJob's pods were data-starved: GPUs below 50% while "
                                 "their readers waited 10% or more of the second "
                                 "(status.gpu.dataStarvedFraction).")));
  GRANARY_ASSIGN_OR_RETURN(
      auto running, registry.addGauge({.name = "granary_job_workers_running",
                                       .type = MetricType::kGauge,
                                       .help = "Workers of a running elastic TrainingJob that run "
                                               "(status.elastic.running).",
                                       .labels = {"namespace", "job"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto changes,
      registry.addCounter({.name = "granary_job_membership_changes_total",
                           .type = MetricType::kCounter,
                           .help = "An elastic TrainingJob's membership changes by kind: a "
                                   "worker Lost, a replacement Joined, a GangRestart.",
                           .labels = {"namespace", "job", "kind"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto recovery,
      registry.addHistogram({.name = "granary_job_worker_recovery_seconds",
                             .type = MetricType::kHistogram,
                             .unit = MetricUnit::kSeconds,
                             .help = "From an elastic TrainingJob's worker lost to its "
                                     "replacement running.",
                             .labels = {"namespace"},
                             .buckets = {1, 5, 15, 30, 60, 120, 300, 900, 3600}}));
  return JobSeries{utilization, wait, starved, running, changes, recovery};
}

}  // namespace granary::op
