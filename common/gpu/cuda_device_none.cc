// Built instead of cuda_device.cu when CUDA support is off.
#include "common/gpu/cuda_device.h"

namespace granary::gpu {

bool builtWithCuda() { return false; }

Result<std::vector<CudaDevice>> listCudaDevices() { return unavailable(GRANARY_CUDA_OFF_REASON); }

Result<double> selfTestCudaDevice(int, int64_t) { return listCudaDevices().status(); }

}  // namespace granary::gpu
