#include "engine/gpu/gpu_sampler.h"

#include <functional>
#include <optional>
#include <set>

#include "common/log.h"

namespace granary::cache {

namespace {

constexpr std::chrono::milliseconds kMinInterval{100};
constexpr std::chrono::milliseconds kMaxInterval{60'000};

MetricSpec gpuGauge(std::string name, MetricUnit unit, std::string help) {
  return {.name = std::move(name),
          .type = MetricType::kGauge,
          .unit = unit,
          .help = std::move(help),
          .labels = {"gpu", "UUID", "modelName", "Hostname", "namespace", "pod", "container"}};
}

// "namespace/name" → {namespace, name}.
std::vector<std::string> splitPod(const std::string& pod) {
  const size_t slash = pod.find('/');
  return {pod.substr(0, slash), slash == std::string::npos ? "" : pod.substr(slash + 1)};
}

std::optional<double> asDouble(const std::optional<int64_t>& bytes) {
  return bytes ? std::optional<double>(static_cast<double>(*bytes)) : std::nullopt;
}

}  // namespace

// One gauge family per reading field, with how to take the field from a reading.
struct GpuSampler::Metrics {
  struct Field {
    GaugeFamily family;
    std::function<std::optional<double>(const gpu::GpuReading&)> of;
  };
  Gauge up;
  std::vector<Field> fields;
  CounterFamily starved;  // {namespace, pod}

  static Result<std::unique_ptr<Metrics>> declare(MetricsRegistry& registry) {
    using U = MetricUnit;
    using R = gpu::GpuReading;
    GRANARY_ASSIGN_OR_RETURN(
        auto up, registry.addGauge({.name = "granary_gpu_sampler_up",
                                    .type = MetricType::kGauge,
                                    .help = "1 while this node samples its GPUs through NVML; 0 "
                                            "without NVML (no driver or GPU: see the log)."}));
    GRANARY_ASSIGN_OR_RETURN(
        auto starved,
        registry.addCounter({.name = "granary_pod_data_starved_seconds_total",
                             .type = MetricType::kCounter,
                             .unit = U::kSeconds,
                             .help = "Seconds in which the pod's GPUs were below 50% utilization "
                                     "while its readers had a read blocked on granary for at "
                                     "least 10% of the second.",
                             .labels = {"namespace", "pod"}}));
    auto metrics = std::make_unique<Metrics>(Metrics{up.with({}), {}, starved});
    const auto field = [&](std::string name, U unit, std::string help,
                           std::function<std::optional<double>(const R&)> of) -> Status {
      GRANARY_ASSIGN_OR_RETURN(auto family,
                               registry.addGauge(gpuGauge(std::move(name), unit, std::move(help))));
      metrics->fields.push_back({family, std::move(of)});
      return Status::ok();
    };
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_utilization_ratio", U::kRatio,
                                  "Share of the driver's last sample period (1/6 s to 1 s) in "
                                  "which a kernel ran on the GPU.",
                                  [](const R& r) { return r.utilization; }));
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_memory_utilization_ratio", U::kRatio,
                                  "Share of the driver's last sample period in which GPU memory "
                                  "was read or written.",
                                  [](const R& r) { return r.memoryUtilization; }));
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_memory_used_bytes", U::kBytes,
                                  "GPU memory allocated.",
                                  [](const R& r) { return asDouble(r.memoryUsedBytes); }));
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_memory_total_bytes", U::kBytes, "GPU memory in all.",
                                  [](const R& r) { return asDouble(r.memoryTotalBytes); }));
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_power_watts", U::kWatts,
                                  "Power drawn by the GPU and its memory.",
                                  [](const R& r) { return r.powerWatts; }));
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_temperature_celsius", U::kCelsius,
                                  "GPU core temperature.",
                                  [](const R& r) { return r.temperatureCelsius; }));
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_sm_clock_hertz", U::kHertz,
                                  "Clock of the streaming multiprocessors.",
                                  [](const R& r) { return r.smClockHertz; }));
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_sm_active_ratio", U::kRatio,
                                  "Share of the GPU's SMs that were busy (a warp resident) since "
                                  "the previous sample; GPM, Hopper and later GPUs only.",
                                  [](const R& r) { return r.smActivity; }));
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_tensor_active_ratio", U::kRatio,
                                  "Share of time a tensor pipe was busy since the previous "
                                  "sample; GPM, Hopper and later GPUs only.",
                                  [](const R& r) { return r.tensorActivity; }));
    GRANARY_RETURN_IF_ERROR(
        field("granary_gpu_pcie_transmit_bytes_per_second", U::kBytesPerSecond,
              "PCIe bytes sent by the GPU per second, over NVML's 20 ms window.",
              [](const R& r) { return r.pcieTransmitBytesPerSecond; }));
    GRANARY_RETURN_IF_ERROR(field("granary_gpu_pcie_receive_bytes_per_second", U::kBytesPerSecond,
                                  "PCIe bytes received by the GPU per second, over NVML's 20 ms "
                                  "window.",
                                  [](const R& r) { return r.pcieReceiveBytesPerSecond; }));
    return metrics;
  }
};

GpuSampler::GpuSampler(GpuSamplerOptions options, Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

Result<std::unique_ptr<GpuSampler>> GpuSampler::start(GpuSamplerOptions options, Clock& clock,
                                                      MetricsRegistry* registry) {
  if (options.interval < kMinInterval || options.interval > kMaxInterval) {
    return invalidArgument("gpuSampleInterval: " + std::to_string(options.interval.count()) +
                           " ms is outside 100 ms to 60 s");
  }
  std::unique_ptr<GpuSampler> sampler(new GpuSampler(std::move(options), clock));
  if (registry != nullptr) {
    GRANARY_ASSIGN_OR_RETURN(sampler->metrics_, Metrics::declare(*registry));
  }
  auto nvml = gpu::Nvml::open(sampler->options_.library);
  if (!nvml.isOk()) {
    Logger("gpu").warn("no GPU telemetry on this node", {{"reason", nvml.status().message()}});
    {
      MutexLock lock(sampler->mutex_);
      sampler->unavailable_ = nvml.status().message();
    }
    return sampler;
  }
  sampler->nvml_ = std::move(*nvml);
  if (!sampler->options_.podResourcesSocket.empty())
    sampler->pods_ = std::make_unique<PodResources>(sampler->options_.podResourcesSocket);
  Logger("gpu").info("sampling GPUs through NVML",
                     {{"driver", sampler->nvml_->driverVersion()},
                      {"interval_ms", sampler->options_.interval.count()}});
  if (sampler->metrics_) sampler->metrics_->up.set(1);
  sampler->sample();
  sampler->thread_ = std::jthread([s = sampler.get()](std::stop_token stop) { s->run(stop); });
  return sampler;
}

GpuSampler::~GpuSampler() = default;

void GpuSampler::run(std::stop_token stop) {
  while (clock_.sleepUntil(clock_.monoNow() + options_.interval, stop)) sample();
}

void GpuSampler::sample() {
  auto readings = nvml_->read();
  if (!readings.isOk()) {
    Logger("gpu").warn("GPU sample failed", {{"error", readings.status()}});
    readings = std::vector<gpu::GpuReading>();
  }
  attribute(*readings);
  judgeStarvation(*readings);
  integrate(*readings);
  {  // What latest() answers is never older than the series already exported.
    MutexLock lock(mutex_);
    latest_ = *readings;
    sampledAt_ = clock_.wallNow();
  }
  publish(*readings);
}

// Each GPU's pod, as the kubelet says now. When it cannot be asked, the GPUs go unattributed
// (a warning when that starts, a note when it ends) and sampling goes on.
void GpuSampler::attribute(std::vector<gpu::GpuReading>& readings) {
  if (!pods_) return;
  auto owners = pods_->gpuOwners();
  if (owners.isOk() != podsAnswered_) {
    podsAnswered_ = owners.isOk();
    if (podsAnswered_)
      Logger("gpu").info("the kubelet's PodResources API answers again");
    else
      Logger("gpu").warn("GPUs are not attributed to pods", {{"error", owners.status()}});
  }
  if (!owners.isOk()) return;
  for (auto& reading : readings) {
    const auto owner = owners->find(reading.uuid);
    if (owner == owners->end()) continue;
    reading.podNamespace = owner->second.podNamespace;
    reading.podName = owner->second.podName;
    reading.container = owner->second.container;
  }
}

// Each attributed pod's verdict over the interval since the last sample.
void GpuSampler::judgeStarvation(const std::vector<gpu::GpuReading>& readings) {
  if (!options_.readerWait) return;
  const auto now = clock_.monoNow();
  const auto interval = judgedAt_ == Clock::MonoTime{} ? Clock::Duration{0} : now - judgedAt_;
  judgedAt_ = now;
  std::map<std::string, std::pair<double, int>> utilization;  // pod → sum, GPUs
  for (const auto& r : readings)
    if (!r.podName.empty() && r.utilization) {
      auto& [sum, count] = utilization[r.podNamespace + "/" + r.podName];
      sum += *r.utilization;
      ++count;
    }
  const auto waits = options_.readerWait();
  std::map<std::string, PodSignals> pods;
  for (const auto& [pod, u] : utilization) {
    const auto wait = waits.find(pod);
    pods[pod] = {u.first / u.second,
                 wait == waits.end() ? std::chrono::nanoseconds{0} : wait->second};
  }
  const auto verdicts = starvation_.observe(pods, interval);
  MutexLock lock(mutex_);
  for (auto it = starved_.begin(); it != starved_.end();) {  // pods that went take their series
    if (pods.contains(it->first)) {
      ++it;
      continue;
    }
    if (metrics_) metrics_->starved.remove(splitPod(it->first));
    it = starved_.erase(it);
  }
  for (const auto& [pod, seconds] : verdicts) {
    starved_[pod] += seconds;
    if (metrics_) metrics_->starved.with(splitPod(pod)).increment(seconds);
  }
}

// Adds the interval since the last sample to each GPU's totals, at this sample's figures (NVML's
// utilization is over the driver's last period, which ends now).
void GpuSampler::integrate(const std::vector<gpu::GpuReading>& readings) {
  const auto now = clock_.monoNow();
  const double seconds = integratedAt_ == Clock::MonoTime{}
                             ? 0
                             : std::chrono::duration<double>(now - integratedAt_).count();
  integratedAt_ = now;
  MutexLock lock(mutex_);
  for (const auto& r : readings) {
    if (r.lost || r.uuid.empty() || !r.utilization) continue;
    GpuTotals& t = totals_[r.uuid];
    t.sampledSeconds += seconds;
    t.busySeconds += *r.utilization * seconds;
    t.memoryByteSeconds += static_cast<double>(r.memoryUsedBytes.value_or(0)) * seconds;
  }
}

void GpuSampler::publish(const std::vector<gpu::GpuReading>& readings) {
  if (!metrics_) return;
  // Each series is set, or removed once its field went empty or its GPU was lost or went.
  std::set<std::pair<size_t, std::vector<std::string>>> now;
  for (const auto& reading : readings) {
    if (reading.lost) continue;
    const std::vector<std::string> labels = {
        std::to_string(reading.index), reading.uuid,    reading.name,     options_.hostname,
        reading.podNamespace,          reading.podName, reading.container};
    for (size_t i = 0; i < metrics_->fields.size(); ++i) {
      const auto value = metrics_->fields[i].of(reading);
      if (!value) continue;
      metrics_->fields[i].family.with(labels).set(*value);
      now.emplace(i, labels);
    }
  }
  for (const auto& [field, labels] : published_)
    if (!now.contains({field, labels})) metrics_->fields[field].family.remove(labels);
  published_ = std::move(now);
}

std::vector<gpu::GpuReading> GpuSampler::latest() const {
  MutexLock lock(mutex_);
  return latest_;
}

Clock::WallTime GpuSampler::sampledAt() const {
  MutexLock lock(mutex_);
  return sampledAt_;
}

std::map<std::string, double> GpuSampler::starvedSeconds() const {
  MutexLock lock(mutex_);
  return starved_;
}

std::map<std::string, GpuTotals> GpuSampler::totals() const {
  MutexLock lock(mutex_);
  return totals_;
}

std::string GpuSampler::unavailableReason() const {
  MutexLock lock(mutex_);
  return unavailable_;
}

}  // namespace granary::cache
