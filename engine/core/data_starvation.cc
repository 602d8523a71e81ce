#include "engine/core/data_starvation.h"

namespace granary::cache {

std::map<std::string, double> StarvationMeter::observe(
    const std::map<std::string, PodSignals>& pods, std::chrono::nanoseconds interval) {
  std::map<std::string, double> starved;
  std::map<std::string, std::chrono::nanoseconds> waits;
  const double seconds = std::chrono::duration<double>(interval).count();
  for (const auto& [pod, signals] : pods) {
    waits[pod] = signals.readerWait;
    const auto before = lastWait_.find(pod);
    if (before == lastWait_.end() || seconds <= 0) continue;
    const double waited =
        std::chrono::duration<double>(signals.readerWait - before->second).count();
    const bool idle = signals.gpuUtilization < thresholds_.gpuIdleBelow;
    const bool waiting = waited >= thresholds_.waitShareAtLeast * seconds;
    starved[pod] = idle && waiting ? seconds : 0;
  }
  lastWait_ = std::move(waits);
  return starved;
}

}  // namespace granary::cache
