// The trainer's CPU accelerator: a busy loop for as long as a training step would last.
#include <utility>

#include "examples/trainer/compute.h"

namespace granary::trainer {
namespace {

class CpuAccelerator final : public Accelerator {
 public:
  explicit CpuAccelerator(std::string whyNoGpu) : whyNoGpu_(std::move(whyNoGpu)) {}

  Status compute(const Batch& /*batch*/, std::chrono::nanoseconds duration) override {
    const auto deadline = std::chrono::steady_clock::now() + duration;
    while (std::chrono::steady_clock::now() < deadline) {
    }
    return Status::ok();
  }

  std::string_view kind() const override { return "cpu"; }

  std::string description() const override { return "CPU (no GPU: " + whyNoGpu_ + ")"; }

 private:
  const std::string whyNoGpu_;
};

}  // namespace

std::unique_ptr<Accelerator> makeCpuAccelerator(std::string whyNoGpu) {
  return std::make_unique<CpuAccelerator>(std::move(whyNoGpu));
}

}  // namespace granary::trainer
