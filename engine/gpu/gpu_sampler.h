// Samples the node's GPUs through NVML (common/gpu/nvml.h) every interval, for /metrics and the
// telemetry API. Without NVML (no driver, no GPU, a failed start) it says why once: a warning in
// the log, granary_gpu_sampler_up 0 and unavailableReason(); it samples nothing, and everything
// else on the node works as before.
//
// Series carry dcgm-exporter's label words (gpu, UUID, modelName, Hostname, and namespace, pod,
// container of the pod the kubelet allocated the GPU to), so that dashboards join the two; a
// field NVML cannot read has no series, and a GPU that is lost or gone has none.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/gpu/nvml.h"
#include "common/metrics.h"
#include "common/thread_annotations.h"
#include "engine/core/data_starvation.h"
#include "engine/gpu/gpu_totals.h"
#include "engine/gpu/pod_resources.h"

namespace granary::cache {

struct GpuSamplerOptions {
  std::string library = gpu::Nvml::kLibrary;  // NVML's library: a file name or a path
  std::chrono::milliseconds interval{1000};
  std::string hostname;  // the Hostname label
  // The kubelet's PodResources socket, to attribute GPUs to pods; "" attributes none.
  std::string podResourcesSocket;
  // Each pod's cumulative data wait ("namespace/name" → time with a read blocked), for the
  // pods' data-starved time (engine/core/data_starvation.h); empty: none is measured.
  std::function<std::map<std::string, std::chrono::nanoseconds>()> readerWait;
};

class GpuSampler {
 public:
  // Opens NVML and starts sampling (the first sample before it returns). `registry` may be null:
  // no metrics. InvalidArgument for an interval outside [100 ms, 60 s].
  static Result<std::unique_ptr<GpuSampler>> start(GpuSamplerOptions options, Clock& clock,
                                                   MetricsRegistry* registry);
  ~GpuSampler();  // stops sampling
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // The last sample (empty before the first one and without NVML), and when it was taken.
  std::vector<gpu::GpuReading> latest() const;
  Clock::WallTime sampledAt() const;
  // Why no GPU is sampled ("" while sampling).
  std::string unavailableReason() const;
  // Each pod's data-starved seconds since it was first seen ("namespace/name"; pods with GPUs).
  std::map<std::string, double> starvedSeconds() const;
  // Each GPU's totals, by UUID (GPUs that went keep theirs: a UUID is never reused).
  std::map<std::string, GpuTotals> totals() const;

  struct Metrics;

 private:
  GpuSampler(GpuSamplerOptions options, Clock& clock);
  void sample();
  void run(std::stop_token stop);
  void publish(const std::vector<gpu::GpuReading>& readings);
  void attribute(std::vector<gpu::GpuReading>& readings);
  void judgeStarvation(const std::vector<gpu::GpuReading>& readings);
  void integrate(const std::vector<gpu::GpuReading>& readings);

  const GpuSamplerOptions options_;
  Clock& clock_;
  std::unique_ptr<gpu::Nvml> nvml_;     // null without NVML
  std::unique_ptr<PodResources> pods_;  // null without a PodResources socket
  bool podsAnswered_ = true;            // the last time they were asked (warned once per change)
  std::unique_ptr<Metrics> metrics_;    // null without a registry
  mutable Mutex mutex_;
  std::vector<gpu::GpuReading> latest_ GRANARY_GUARDED_BY(mutex_);
  Clock::WallTime sampledAt_ GRANARY_GUARDED_BY(mutex_){};
  std::string unavailable_ GRANARY_GUARDED_BY(mutex_);
  // By pod.
  std::map<std::string, double> starved_ GRANARY_GUARDED_BY(mutex_);
  // By UUID.
  std::map<std::string, GpuTotals> totals_ GRANARY_GUARDED_BY(mutex_);
  Clock::MonoTime integratedAt_{};  // the sampling thread's
  StarvationMeter starvation_;      // the sampling thread's
  Clock::MonoTime judgedAt_{};
  // The series set by the last sample: field and label values (the sampling thread's).
  std::set<std::pair<size_t, std::vector<std::string>>> published_;
  std::jthread thread_;  // last: stops first
};

}  // namespace granary::cache
