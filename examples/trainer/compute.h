// The trainer's model of an accelerator: a training step that takes a set time per sample, on
// a GPU when this build has CUDA and the runtime finds one, else on the CPU.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "examples/trainer/loader.h"

namespace granary::trainer {

// One training step at a time; not thread-safe (the training loop owns it).
class Accelerator {
 public:
  virtual ~Accelerator() = default;

  // Models a training step over `batch` that lasts `duration` and returns once it is done.
  // The GPU copies the batch's bytes to device memory first, so the step also lasts as long
  // as that copy. Unavailable when the device fails (the message carries the runtime's reason).
  virtual Status compute(const Batch& batch, std::chrono::nanoseconds duration) = 0;

  // "gpu" or "cpu", as the report's "device" field says it.
  virtual std::string_view kind() const = 0;

  // For the start-up line, e.g. "GPU 0 (NVIDIA H100 80GB HBM3)" or
  // "CPU (no GPU: no CUDA device is present)".
  virtual std::string description() const = 0;
};

// Spins on std::chrono::steady_clock for `duration` (a calibrated busy loop that keeps one
// core busy, as a training step keeps an accelerator busy).
std::unique_ptr<Accelerator> makeCpuAccelerator(std::string whyNoGpu);

// The first GPU the CUDA runtime sees (CUDA_VISIBLE_DEVICES applies), or the CPU when this
// build has no CUDA or no GPU can be used; the CPU's description then says why.
std::unique_ptr<Accelerator> openAccelerator();

}  // namespace granary::trainer
