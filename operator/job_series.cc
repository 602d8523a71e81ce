#include "operator/job_series.h"

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
  return JobSeries{utilization, wait, starved};
}

}  // namespace granary::op
