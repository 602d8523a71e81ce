#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/gpu/cuda_device.h"
#include "common/quantity.h"

namespace granary::cli {

int doctorCommand(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::fprintf(stderr, "granaryctl doctor: takes no arguments\n");
    return 2;
  }
  std::printf("granary %s\n", GRANARY_VERSION);
  std::printf("CUDA support compiled in: %s\n", gpu::builtWithCuda() ? "yes" : "no");
  auto devices = gpu::listCudaDevices();
  if (!devices.isOk()) {
    std::printf("GPUs: none usable (%s)\n", devices.status().message().c_str());
    std::printf("granary runs without GPUs; GPU telemetry and GPU checks are skipped.\n");
    return 0;
  }
  for (const auto& device : *devices) {
    std::printf("GPU %d: %s, compute %d.%d, %s memory\n", device.index, device.name.c_str(),
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
