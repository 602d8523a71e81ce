#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/gpu/cuda_device.h"

namespace granary::gpu {
namespace {

Status cudaUnavailable(const char* what, cudaError_t error) {
  return unavailable(std::string(what) + ": " + cudaGetErrorString(error));
}

__global__ void saxpy(int64_t n, float a, const float* x, float* y) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// Frees device memory when leaving scope, whatever the path.
struct DeviceBuffer {
  float* data = nullptr;
  ~DeviceBuffer() {
    if (data) cudaFree(data);
  }
};

}  // namespace

bool builtWithCuda() { return true; }

Result<std::vector<CudaDevice>> listCudaDevices() {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    // Without the driver's library the runtime only says its version is "insufficient".
    if (void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL); driver != nullptr) {
      ::dlclose(driver);
    } else {
      return unavailable("no NVIDIA driver: libcuda.so.1 is not installed");
    }
    return cudaUnavailable("no usable CUDA device", error);
  }
  if (count == 0) return unavailable("no CUDA device is present");
  std::vector<CudaDevice> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp properties{};
    if (const cudaError_t error = cudaGetDeviceProperties(&properties, i); error != cudaSuccess) {
      return cudaUnavailable("cannot read CUDA device properties", error);
    }
    devices.push_back(CudaDevice{i, properties.name, properties.major, properties.minor,
                                 static_cast<int64_t>(properties.totalGlobalMem)});
  }
  return devices;
}

Result<double> selfTestCudaDevice(int index, int64_t elements) {
  if (elements <= 0 || elements > (int64_t{1} << 30)) {
    return invalidArgument("elements must be between 1 and 2^30");
  }
  GRANARY_ASSIGN_OR_RETURN(auto devices, listCudaDevices());
  if (index < 0 || index >= static_cast<int>(devices.size())) {
    return invalidArgument("device index " + std::to_string(index) + " is out of range (" +
                           std::to_string(devices.size()) + " devices)");
  }
  if (const cudaError_t e = cudaSetDevice(index); e != cudaSuccess) {
    return cudaUnavailable("cudaSetDevice", e);
  }
  const size_t n = static_cast<size_t>(elements);
  std::vector<float> x(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1024);
    y[i] = 1.0f;
  }
  DeviceBuffer dx, dy;
  const size_t bytes = n * sizeof(float);
  if (cudaError_t e = cudaMalloc(&dx.data, bytes); e != cudaSuccess)
    return cudaUnavailable("cudaMalloc", e);
  if (cudaError_t e = cudaMalloc(&dy.data, bytes); e != cudaSuccess)
    return cudaUnavailable("cudaMalloc", e);
  if (cudaError_t e = cudaMemcpy(dx.data, x.data(), bytes, cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return cudaUnavailable("cudaMemcpy", e);
  }
  if (cudaError_t e = cudaMemcpy(dy.data, y.data(), bytes, cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    return cudaUnavailable("cudaMemcpy", e);
  }

  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((elements + kThreads - 1) / kThreads);
  cudaEventRecord(start);
  saxpy<<<blocks, kThreads>>>(elements, 2.0f, dx.data, dy.data);
  cudaEventRecord(stop);
  const cudaError_t launch = cudaEventSynchronize(stop);
  float milliseconds = 0;
  cudaEventElapsedTime(&milliseconds, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (launch != cudaSuccess) return cudaUnavailable("kernel", launch);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return cudaUnavailable("kernel", e);

  if (cudaError_t e = cudaMemcpy(y.data(), dy.data, bytes, cudaMemcpyDeviceToHost);
      e != cudaSuccess) {
    return cudaUnavailable("cudaMemcpy", e);
  }
  for (size_t i = 0; i < n; ++i) {
    const float want = 2.0f * static_cast<float>(i % 1024) + 1.0f;
    if (std::fabs(y[i] - want) > 1e-3f) {
      return corruption("device " + std::to_string(index) + " computed " + std::to_string(y[i]) +
                        " at element " + std::to_string(i) + ", expected " + std::to_string(want));
    }
  }
  return milliseconds / 1000.0;
}

}  // namespace granary::gpu
