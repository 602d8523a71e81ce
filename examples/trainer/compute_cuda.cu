// The trainer's GPU accelerator (CUDA builds): each step copies the batch to the device from
// pinned memory, then runs a kernel that spins on the SM's cycle counter for the step's time.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "common/gpu/cuda_device.h"
#include "examples/trainer/compute.h"

namespace granary::trainer {
namespace {

Status cudaFailure(const char* what, cudaError_t error) {
  return unavailable(std::string(what) + ": " + cudaGetErrorString(error));
}

// Busy-waits `cycles` SM clock cycles on one thread: the modelled training step.
__global__ void spinForCycles(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

class GpuAccelerator final : public Accelerator {
 public:
  // Selects `device` and creates the stream. Unavailable with the runtime's reason.
  static Result<std::unique_ptr<Accelerator>> open(const gpu::CudaDevice& device) {
    auto accelerator = std::unique_ptr<GpuAccelerator>(new GpuAccelerator(device));
    if (cudaError_t e = cudaSetDevice(device.index); e != cudaSuccess) {
      return cudaFailure("cudaSetDevice", e);
    }
    if (cudaError_t e =
            cudaDeviceGetAttribute(&accelerator->clockKhz_, cudaDevAttrClockRate, device.index);
        e != cudaSuccess) {
      return cudaFailure("cudaDeviceGetAttribute(cudaDevAttrClockRate)", e);
    }
    if (cudaError_t e = cudaStreamCreateWithFlags(&accelerator->stream_, cudaStreamNonBlocking);
        e != cudaSuccess) {
      return cudaFailure("cudaStreamCreate", e);
    }
    return std::unique_ptr<Accelerator>(std::move(accelerator));
  }

  ~GpuAccelerator() override {
    releaseBuffers();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status compute(const Batch& batch, std::chrono::nanoseconds duration) override {
    const size_t size = batch.bytes.size();
    GRANARY_RETURN_IF_ERROR(reserve(size));
    if (size > 0) {
      std::memcpy(pinnedBuffer_, batch.bytes.data(), size);
      if (cudaError_t e =
              cudaMemcpyAsync(deviceBuffer_, pinnedBuffer_, size, cudaMemcpyHostToDevice, stream_);
          e != cudaSuccess) {
        return cudaFailure("cudaMemcpyAsync", e);
      }
    }
    spinForCycles<<<1, 1, 0, stream_>>>(cyclesIn(duration));
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cudaFailure("kernel", e);
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess) {
      return cudaFailure("cudaStreamSynchronize", e);
    }
    return Status::ok();
  }

  std::string_view kind() const override { return "gpu"; }

  std::string description() const override {
    return "GPU " + std::to_string(gpu_.index) + " (" + gpu_.name + ")";
  }

 private:
  explicit GpuAccelerator(gpu::CudaDevice device) : gpu_(std::move(device)) {}

  // The device's peak clock: a GPU running below it takes longer than `duration`.
  long long cyclesIn(std::chrono::nanoseconds duration) const {
    return static_cast<long long>(static_cast<double>(duration.count()) * 1e-6 * clockKhz_);
  }

  // Grows the pinned and the device buffer to hold at least `size` bytes.
  Status reserve(size_t size) {
    if (size <= capacity_) return Status::ok();
    releaseBuffers();
    const size_t capacity = std::max(size, 2 * capacity_);
    if (cudaError_t e = cudaMallocHost(&pinnedBuffer_, capacity); e != cudaSuccess) {
      pinnedBuffer_ = nullptr;
      return cudaFailure("cudaMallocHost", e);
    }
    if (cudaError_t e = cudaMalloc(&deviceBuffer_, capacity); e != cudaSuccess) {
      deviceBuffer_ = nullptr;
      return cudaFailure("cudaMalloc", e);
    }
    capacity_ = capacity;
    return Status::ok();
  }

  void releaseBuffers() {
    if (pinnedBuffer_ != nullptr) cudaFreeHost(pinnedBuffer_);
    if (deviceBuffer_ != nullptr) cudaFree(deviceBuffer_);
    pinnedBuffer_ = nullptr;
    deviceBuffer_ = nullptr;
    capacity_ = 0;
  }

  const gpu::CudaDevice gpu_;
  int clockKhz_ = 0;
  cudaStream_t stream_ = nullptr;
  void* pinnedBuffer_ = nullptr;  // cudaMallocHost, capacity_ bytes
  void* deviceBuffer_ = nullptr;  // cudaMalloc, capacity_ bytes
  size_t capacity_ = 0;
};

}  // namespace

std::unique_ptr<Accelerator> openAccelerator() {
  auto devices = gpu::listCudaDevices();
  if (!devices.isOk()) return makeCpuAccelerator(devices.status().message());
  auto accelerator = GpuAccelerator::open(devices->front());
  if (!accelerator.isOk()) {
    return makeCpuAccelerator("GPU " + std::to_string(devices->front().index) +
                              " cannot be used: " + accelerator.status().message());
  }
  return std::move(accelerator).value();
}

}  // namespace granary::trainer
