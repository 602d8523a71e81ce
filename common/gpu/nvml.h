// NVML, the NVIDIA driver's management library, loaded at run time: dlopen() of
// libnvidia-ml.so.1 and its versioned symbols (nvmlInit_v2, nvmlDeviceGetCount_v2, ...), never
// linked, so that a machine without the driver runs every binary unchanged. Readings are per
// field: a field NVML cannot give (NOT_SUPPORTED, NO_PERMISSION, ...) is left empty, never the
// whole reading; a GPU that fell off the bus (GPU_IS_LOST) is reported lost, the others read on.
//
// Thread-compatible: one thread reads at a time (the sampler's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace granary::gpu {

// A compute process on a GPU.
struct GpuProcess {
  int pid = 0;
  std::optional<int64_t> memoryUsedBytes;
  // The share of the interval since the previous reading in which the process ran kernels on
  // the GPU (NVML's per-process SM utilization), 0..1; empty where NVML gives none.
  std::optional<double> smUtilization;
};

// One GPU at one instant.
struct GpuReading {
  int index = 0;
  std::string uuid;                   // "GPU-…"
  std::string name;                   // the model, e.g. "NVIDIA H100 80GB HBM3"
  bool lost = false;                  // GPU_IS_LOST: nothing else was read
  std::optional<double> utilization;  // 0..1: the share of the driver's last period with a kernel
  std::optional<double> memoryUtilization;  // 0..1 of that period reading or writing memory
  std::optional<int64_t> memoryUsedBytes;
  std::optional<int64_t> memoryTotalBytes;
  std::optional<double> powerWatts;
  std::optional<double> temperatureCelsius;
  std::optional<double> smClockHertz;
  std::optional<double> pcieTransmitBytesPerSecond;
  std::optional<double> pcieReceiveBytesPerSecond;
  // GPU performance monitoring (GPM, Hopper and later), over the interval since the previous
  // reading, 0..1: the share of SMs that were busy (a warp resident), and the share of time a
  // tensor pipe was busy. Empty on older GPUs and drivers, and at a GPU's first reading (GPM needs
  // two samples).
  std::optional<double> smActivity;
  std::optional<double> tensorActivity;
  std::vector<GpuProcess> processes;
  // The pod and container it is allocated to; NVML knows nothing of pods: the cache node's
  // sampler fills these from the kubelet ("" when unallocated or unknown).
  std::string podNamespace, podName, container;
};

class Nvml {
 public:
  static constexpr const char* kLibrary = "libnvidia-ml.so.1";

  // Loads `library` (a file name searched as dlopen does, or a path) and initializes NVML.
  // Unavailable with the reason in words: no driver installed (the library is missing), the
  // driver not loaded, no permission, or what nvmlInit_v2 said.
  static Result<std::unique_ptr<Nvml>> open(const std::string& library = kLibrary);
  ~Nvml();  // nvmlShutdown, then the library is unloaded
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  const std::string& driverVersion() const { return driverVersion_; }  // "" when NVML says none
  // Every GPU NVML sees. Unavailable only when the devices cannot be counted.
  Result<std::vector<GpuReading>> read();

  struct Api;  // the resolved entry points

 private:
  Nvml() = default;
  GpuReading readDevice(unsigned index);
  void readActivity(unsigned index, void* device, GpuReading& reading);

  // A GPU's GPM state: whether it supports GPM (asked once) and its two sample buffers.
  struct Gpm {
    bool asked = false, supported = false, havePrevious = false;
    void* previous = nullptr;
    void* current = nullptr;
  };

  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
  std::string driverVersion_;
  std::vector<unsigned long long> lastProcessSample_;  // per device: NVML's timestamp, in µs
  std::vector<Gpm> gpm_;                               // per device
};

}  // namespace granary::gpu
