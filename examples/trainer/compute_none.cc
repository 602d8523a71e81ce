// openAccelerator for builds without CUDA (built instead of compute_cuda.cu): always the CPU.
#include "common/gpu/cuda_device.h"
#include "examples/trainer/compute.h"

namespace granary::trainer {

std::unique_ptr<Accelerator> openAccelerator() {
  // granary_gpu says why there is no GPU in the same words as `granaryctl doctor`.
  return makeCpuAccelerator(gpu::listCudaDevices().status().message());
}

}  // namespace granary::trainer
