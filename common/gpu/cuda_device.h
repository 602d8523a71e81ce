// What the CUDA runtime sees on this machine. Works in every build: without CUDA support,
// or on a machine without a GPU or driver, the functions return Unavailable with the reason
// instead of failing the process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace granary::gpu {

struct CudaDevice {
  int index = 0;
  std::string name;
  int computeMajor = 0;  // compute capability, e.g. 9.0 for Hopper
  int computeMinor = 0;
  int64_t memoryBytes = 0;
};

// True when this build compiled its CUDA code (nvcc was present at build time).
bool builtWithCuda();

// The GPUs the CUDA runtime can use. Unavailable when built without CUDA or when the runtime
// reports no device or driver (the message carries the runtime's reason).
Result<std::vector<CudaDevice>> listCudaDevices();

// Runs a kernel on device `index` over `elements` floats (y = a*x + y) and checks every
// result on the host. Returns the kernel's time in seconds. Unavailable without a usable
// device; Corruption when a result is wrong; InvalidArgument for a bad index or size.
Result<double> selfTestCudaDevice(int index, int64_t elements);

}  // namespace granary::gpu
