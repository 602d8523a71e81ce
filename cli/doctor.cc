#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "common/gpu/cuda_device.h"
#include "common/gpu/nvml.h"
#include "common/quantity.h"

namespace granary::cli {
namespace {

constexpr const char* kDoctorUsage =
    "usage: granaryctl doctor [--nvml-library PATH]\n"
    "  what NVML and the CUDA runtime see on this machine, with a verified kernel on each GPU\n";

// The fields of a reading NVML could not give, comma-separated ("" when none).
std::string unreadable(const gpu::GpuReading& r) {
  std::string missing;
  const auto note = [&](bool present, const char* name) {
    if (!present) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  note(r.utilization.has_value(), "utilization");
  note(r.memoryTotalBytes.has_value(), "memory");
  note(r.powerWatts.has_value(), "power");
  note(r.temperatureCelsius.has_value(), "temperature");
  note(r.smClockHertz.has_value(), "SM clock");
  note(r.pcieTransmitBytesPerSecond.has_value(), "PCIe throughput");
  note(r.smActivity.has_value(), "SM and tensor activity (GPM: Hopper and later GPUs)");
  return missing;
}

// Prints what NVML sees; false when there is no NVIDIA driver to speak of.
bool printNvml(const std::string& library) {
  auto nvml = gpu::Nvml::open(library);
  if (!nvml.isOk()) {
    std::printf("NVML: %s\n", nvml.status().message().c_str());
    return false;
  }
  // Read twice: SM and tensor activity (GPM) compare two samples.
  auto readings = (*nvml)->read();
  if (readings.isOk()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    readings = (*nvml)->read();
  }
  if (!readings.isOk()) {
    std::printf("NVML: driver %s, %s\n", (*nvml)->driverVersion().c_str(),
                readings.status().message().c_str());
    return true;
  }
  std::printf("NVML: driver %s, %zu GPU%s\n", (*nvml)->driverVersion().c_str(), readings->size(),
              readings->size() == 1 ? "" : "s");
  for (const auto& r : *readings) {
    if (r.lost) {
      std::printf("  GPU %d %s: lost (fallen off the bus)\n", r.index, r.uuid.c_str());
      continue;
    }
    std::printf("  GPU %d: %s %s, utilization %.0f%%, memory %s of %s, %zu compute process%s\n",
                r.index, r.name.c_str(), r.uuid.c_str(), r.utilization.value_or(0) * 100,
                formatByteSize({r.memoryUsedBytes.value_or(0)}).c_str(),
                formatByteSize({r.memoryTotalBytes.value_or(0)}).c_str(), r.processes.size(),
                r.processes.size() == 1 ? "" : "es");
    if (r.smActivity && r.tensorActivity)
      std::printf("    SM activity %.0f%%, tensor activity %.0f%%\n", *r.smActivity * 100,
                  *r.tensorActivity * 100);
    if (const std::string missing = unreadable(r); !missing.empty())
      std::printf("    not readable here: %s\n", missing.c_str());
  }
  return true;
}

}  // namespace

int doctorCommand(const std::vector<std::string>& args) {
  std::string library = gpu::Nvml::kLibrary;
  if (args.size() == 2 && args[0] == "--nvml-library") {
    library = args[1];
  } else if (!args.empty()) {
    std::fprintf(stderr, "granaryctl doctor: unexpected argument \"%s\"\n%s", args[0].c_str(),
                 kDoctorUsage);
    return 2;
  }
  std::printf("granary %s\n", GRANARY_VERSION);
  if (!printNvml(library)) {
    std::printf("granary runs without GPUs; GPU telemetry and GPU checks are skipped.\n");
    return 0;
  }
  std::printf("CUDA support compiled in: %s\n", gpu::builtWithCuda() ? "yes" : "no");
  auto devices = gpu::listCudaDevices();
  if (!devices.isOk()) {
    std::printf("CUDA: no usable GPU (%s)\n", devices.status().message().c_str());
    return 0;
  }
  for (const auto& device : *devices) {
    std::printf("CUDA GPU %d: %s, compute %d.%d, %s memory\n", device.index, device.name.c_str(),
                device.computeMajor, device.computeMinor,
                formatByteSize({device.memoryBytes}).c_str());
    auto seconds = gpu::selfTestCudaDevice(device.index, 1 << 24);
    if (seconds.isOk()) {
      std::printf("  self-test: 16M-element kernel verified in %.3f ms\n", *seconds * 1e3);
    } else {
      std::printf("  self-test FAILED: %s\n", seconds.status().toString().c_str());
      return 1;
    }
  }
  return 0;
}

int versionCommand(const std::vector<std::string>&) {
  std::printf("granaryctl %s\n", GRANARY_VERSION);
  return 0;
}

}  // namespace granary::cli
