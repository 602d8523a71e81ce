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
  api_->shutdown();
  ::dlclose(library_);
}

Result<std::vector<GpuReading>> Nvml::read() {
  unsigned count = 0;
  if (const nvmlReturn_t counted = api_->count(&count); counted != kSuccess)
    return unavailable(std::string("cannot count the GPUs: ") + api_->errorString(counted));
  lastProcessSample_.resize(count, 0);
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

}  // namespace granary::gpu
