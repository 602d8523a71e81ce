#include "common/gpu/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>

namespace granary::gpu {
namespace {

// NVML's C ABI, as its public header (nvml.h) declares it: only what granary uses.
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kNoPermission = 4;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kDriverNotLoaded = 9;
constexpr nvmlReturn_t kGpuIsLost = 15;
constexpr unsigned kTemperatureGpu = 0;  // nvmlTemperatureSensors_t
constexpr unsigned kClockSm = 1;         // nvmlClockType_t
constexpr unsigned kPcieTxBytes = 0;     // nvmlPcieUtilCounter_t, in KB/s
constexpr unsigned kPcieRxBytes = 1;
constexpr unsigned kNameBuffer = 96;                      // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBuffer = 80;                      // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned long long kValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE

struct nvmlUtilization_t {
  unsigned gpu, memory;  // percent
};
struct nvmlMemory_t {
  unsigned long long total, free, used;  // bytes
};
struct nvmlProcessInfo_t {  // nvmlProcessInfo_v2_t, what the _v3 process queries fill
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
};
// GPU performance monitoring (nvml.h, "GPM"): opaque sample buffers compared two at a time.
using nvmlGpmSample_t = struct nvmlGpmSample_st*;
constexpr unsigned kGpmVersion = 1;     // NVML_GPM_SUPPORT_VERSION, NVML_GPM_METRICS_GET_VERSION
constexpr unsigned kGpmSmUtil = 2;      // NVML_GPM_METRIC_SM_UTIL, percent
constexpr unsigned kGpmTensorUtil = 5;  // NVML_GPM_METRIC_ANY_TENSOR_UTIL, percent
struct nvmlGpmSupport_t {
  unsigned version, isSupportedDevice;
};
struct nvmlGpmMetric_t {
  unsigned metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char *shortName, *longName, *unit;
  } metricInfo;
};
struct nvmlGpmMetricsGet_t {
  unsigned version, numMetrics;
  nvmlGpmSample_t sample1, sample2;
  // NVML reads numMetrics entries; the header's NVML_GPM_METRIC_MAX grows between releases, so
  // room for what granary asks is enough.
  nvmlGpmMetric_t metrics[2];
};
struct nvmlProcessUtilizationSample_t {
  unsigned pid;
  unsigned long long timeStamp;                // µs
  unsigned smUtil, memUtil, encUtil, decUtil;  // percent
};

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*errorString)(nvmlReturn_t);
  nvmlReturn_t (*driverVersion)(char*, unsigned);
  nvmlReturn_t (*count)(unsigned*);
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*);                  // milliwatts
  nvmlReturn_t (*temperature)(nvmlDevice_t, unsigned, unsigned*);  // °C
  nvmlReturn_t (*clock)(nvmlDevice_t, unsigned, unsigned*);        // MHz
  nvmlReturn_t (*pcie)(nvmlDevice_t, unsigned, unsigned*);         // KB/s
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
  nvmlReturn_t (*processUtilization)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned*,
                                     unsigned long long);
  // GPM (drivers from R525 on); null where the driver has none.
  nvmlReturn_t (*gpmSupport)(nvmlDevice_t, nvmlGpmSupport_t*);
  nvmlReturn_t (*gpmAlloc)(nvmlGpmSample_t*);
  nvmlReturn_t (*gpmFree)(nvmlGpmSample_t);
  nvmlReturn_t (*gpmSample)(nvmlDevice_t, nvmlGpmSample_t);
  nvmlReturn_t (*gpmMetrics)(nvmlGpmMetricsGet_t*);
};

namespace {

template <typename Function>
bool resolve(void* library, const char* symbol, Function& into) {
  into = reinterpret_cast<Function>(::dlsym(library, symbol));
  return into != nullptr;
}

// The words for an nvmlInit_v2 failure.
std::string initFailure(nvmlReturn_t result, const char* what) {
  if (result == kDriverNotLoaded)
    return "the NVIDIA driver is not loaded (nvmlInit_v2: " + std::string(what) + ")";
  if (result == kNoPermission)
    return "no permission to use the NVIDIA driver (nvmlInit_v2: " + std::string(what) + ")";
  return "NVML could not start (nvmlInit_v2: " + std::string(what) + ")";
}

}  // namespace

Result<std::unique_ptr<Nvml>> Nvml::open(const std::string& library) {
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return unavailable("no NVIDIA driver: " + library + " cannot be loaded (" + ::dlerror() + ")");
  }
  std::unique_ptr<Nvml> nvml(new Nvml());
  nvml->library_ = handle;
  nvml->api_ = std::make_unique<Api>();
  Api& api = *nvml->api_;
  const bool complete = resolve(handle, "nvmlInit_v2", api.init) &&
                        resolve(handle, "nvmlShutdown", api.shutdown) &&
                        resolve(handle, "nvmlErrorString", api.errorString) &&
                        resolve(handle, "nvmlSystemGetDriverVersion", api.driverVersion) &&
                        resolve(handle, "nvmlDeviceGetCount_v2", api.count) &&
                        resolve(handle, "nvmlDeviceGetHandleByIndex_v2", api.handle) &&
                        resolve(handle, "nvmlDeviceGetUUID", api.uuid) &&
                        resolve(handle, "nvmlDeviceGetName", api.name) &&
                        resolve(handle, "nvmlDeviceGetUtilizationRates", api.utilization) &&
                        resolve(handle, "nvmlDeviceGetMemoryInfo", api.memory) &&
                        resolve(handle, "nvmlDeviceGetPowerUsage", api.power) &&
                        resolve(handle, "nvmlDeviceGetTemperature", api.temperature) &&
                        resolve(handle, "nvmlDeviceGetClockInfo", api.clock) &&
                        resolve(handle, "nvmlDeviceGetPcieThroughput", api.pcie) &&
                        resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", api.processes) &&
                        resolve(handle, "nvmlDeviceGetProcessUtilization", api.processUtilization);
  if (!complete) {
    ::dlclose(handle);
    nvml->library_ = nullptr;
    return unavailable(library +
                       " lacks NVML entry points granary needs (a driver older than "
                       "R470?): update the NVIDIA driver");
  }
  const bool gpm = resolve(handle, "nvmlGpmQueryDeviceSupport", api.gpmSupport) &&
                   resolve(handle, "nvmlGpmSampleAlloc", api.gpmAlloc) &&
                   resolve(handle, "nvmlGpmSampleFree", api.gpmFree) &&
                   resolve(handle, "nvmlGpmSampleGet", api.gpmSample) &&
                   resolve(handle, "nvmlGpmMetricsGet", api.gpmMetrics);
  if (!gpm) api.gpmSupport = nullptr;
  if (const nvmlReturn_t started = api.init(); started != kSuccess) {
    const std::string why = initFailure(started, api.errorString(started));
    ::dlclose(handle);
    nvml->library_ = nullptr;
    return unavailable(why);
  }
  std::array<char, 96> version{};
  if (api.driverVersion(version.data(), version.size()) == kSuccess)
    nvml->driverVersion_ = version.data();
  return nvml;
}

Nvml::~Nvml() {
  if (library_ == nullptr) return;
  for (const Gpm& gpm : gpm_) {
    if (gpm.previous) api_->gpmFree(static_cast<nvmlGpmSample_t>(gpm.previous));
    if (gpm.current) api_->gpmFree(static_cast<nvmlGpmSample_t>(gpm.current));
  }
  api_->shutdown();
  ::dlclose(library_);
}

Result<std::vector<GpuReading>> Nvml::read() {
  unsigned count = 0;
  if (const nvmlReturn_t counted = api_->count(&count); counted != kSuccess)
    return unavailable(std::string("cannot count the GPUs: ") + api_->errorString(counted));
  lastProcessSample_.resize(count, 0);
  if (gpm_.size() < count) gpm_.resize(count);
  std::vector<GpuReading> readings;
  readings.reserve(count);
  for (unsigned i = 0; i < count; ++i) readings.push_back(readDevice(i));
  return readings;
}

GpuReading Nvml::readDevice(unsigned index) {
  GpuReading reading;
  reading.index = static_cast<int>(index);
  nvmlDevice_t device = nullptr;
  const nvmlReturn_t found = api_->handle(index, &device);
  if (found != kSuccess) {
    reading.lost = found == kGpuIsLost;
    return reading;
  }
  // A field NVML cannot give stays empty; a GPU that fell off the bus ends the reading.
  const auto ok = [&](nvmlReturn_t result) {
    reading.lost = reading.lost || result == kGpuIsLost;
    return result == kSuccess;
  };
  std::array<char, kUuidBuffer> uuid{};
  if (ok(api_->uuid(device, uuid.data(), uuid.size()))) reading.uuid = uuid.data();
  std::array<char, kNameBuffer> name{};
  if (ok(api_->name(device, name.data(), name.size()))) reading.name = name.data();
  nvmlUtilization_t utilization{};
  if (ok(api_->utilization(device, &utilization))) {
    reading.utilization = utilization.gpu / 100.0;
    reading.memoryUtilization = utilization.memory / 100.0;
  }
  nvmlMemory_t memory{};
  if (ok(api_->memory(device, &memory))) {
    reading.memoryUsedBytes = static_cast<int64_t>(memory.used);
    reading.memoryTotalBytes = static_cast<int64_t>(memory.total);
  }
  unsigned value = 0;
  if (ok(api_->power(device, &value))) reading.powerWatts = value / 1000.0;
  if (ok(api_->temperature(device, kTemperatureGpu, &value))) reading.temperatureCelsius = value;
  if (ok(api_->clock(device, kClockSm, &value))) reading.smClockHertz = value * 1e6;
  if (ok(api_->pcie(device, kPcieTxBytes, &value)))
    reading.pcieTransmitBytesPerSecond = value * 1024.0;
  if (ok(api_->pcie(device, kPcieRxBytes, &value)))
    reading.pcieReceiveBytesPerSecond = value * 1024.0;
  readActivity(index, device, reading);
  if (reading.lost) return GpuReading{.index = reading.index, .uuid = reading.uuid, .lost = true};

  // Compute processes: asked with no room first, which says how many there are.
  unsigned processCount = 0;
  std::vector<nvmlProcessInfo_t> processes;
  nvmlReturn_t r = api_->processes(device, &processCount, nullptr);
  while (r == kInsufficientSize) {
    processes.resize(processCount + 4);  // room for a few that start meanwhile
    processCount = static_cast<unsigned>(processes.size());
    r = api_->processes(device, &processCount, processes.data());
  }
  if (r == kSuccess) {
    processes.resize(processCount);
    for (const auto& p : processes) {
      GpuProcess process{.pid = static_cast<int>(p.pid)};
      if (p.usedGpuMemory != kValueNotAvailable)
        process.memoryUsedBytes = static_cast<int64_t>(p.usedGpuMemory);
      reading.processes.push_back(process);
    }
  }
  // Their SM utilization since the previous reading (NVML keeps samples for a few seconds).
  unsigned sampleCount = 0;
  std::vector<nvmlProcessUtilizationSample_t> samples;
  unsigned long long& since = lastProcessSample_[index];
  r = api_->processUtilization(device, nullptr, &sampleCount, since);
  if (r == kInsufficientSize && sampleCount > 0) {
    samples.resize(sampleCount);
    r = api_->processUtilization(device, samples.data(), &sampleCount, since);
    if (r == kSuccess) {
      samples.resize(sampleCount);
      for (const auto& sample : samples) {
        since = std::max(since, sample.timeStamp);
        for (auto& process : reading.processes) {
          if (process.pid == static_cast<int>(sample.pid))
            process.smUtilization =
                std::max(process.smUtilization.value_or(0), sample.smUtil / 100.0);
        }
      }
    }
  }
  return reading;
}

// SM and tensor activity from two GPM samples: the previous reading's and this one's. A GPU
// without GPM is asked once; one whose sample fails (lost) starts over at its next reading.
void Nvml::readActivity(unsigned index, void* handle, GpuReading& reading) {
  if (api_->gpmSupport == nullptr) return;
  const auto device = static_cast<nvmlDevice_t>(handle);
  Gpm& gpm = gpm_[index];
  if (!gpm.asked) {
    gpm.asked = true;
    nvmlGpmSupport_t support{.version = kGpmVersion, .isSupportedDevice = 0};
    nvmlGpmSample_t previous = nullptr, current = nullptr;
    gpm.supported = api_->gpmSupport(device, &support) == kSuccess && support.isSupportedDevice &&
                    api_->gpmAlloc(&previous) == kSuccess && api_->gpmAlloc(&current) == kSuccess;
    gpm.previous = previous;
    gpm.current = current;
  }
  if (!gpm.supported) return;
  const nvmlReturn_t sampled = api_->gpmSample(device, static_cast<nvmlGpmSample_t>(gpm.current));
  if (sampled != kSuccess) {
    reading.lost = reading.lost || sampled == kGpuIsLost;
    gpm.havePrevious = false;
    return;
  }
  if (gpm.havePrevious) {
    nvmlGpmMetricsGet_t get{.version = kGpmVersion,
                            .numMetrics = 2,
                            .sample1 = static_cast<nvmlGpmSample_t>(gpm.previous),
                            .sample2 = static_cast<nvmlGpmSample_t>(gpm.current),
                            .metrics = {{.metricId = kGpmSmUtil}, {.metricId = kGpmTensorUtil}}};
    if (api_->gpmMetrics(&get) == kSuccess) {
      if (get.metrics[0].nvmlReturn == kSuccess) reading.smActivity = get.metrics[0].value / 100;
      if (get.metrics[1].nvmlReturn == kSuccess)
        reading.tensorActivity = get.metrics[1].value / 100;
    }
  }
  std::swap(gpm.previous, gpm.current);
  gpm.havePrevious = true;
}

}  // namespace granary::gpu
