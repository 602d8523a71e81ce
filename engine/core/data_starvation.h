// Data-starved time: the seconds in which a pod's GPUs sat idle while its readers waited for
// granary. Both signals live on the node and are sampled over the same interval (the GPU
// sampler's, 1 s by default), so the verdict is per interval: the interval counts, whole, as
// data-starved when
//   - the mean utilization of the pod's GPUs over it was below `gpuIdleBelow` (0.5), and
//   - the pod's readers had a read blocked on granary for at least `waitShareAtLeast` (0.1)
//     of it (wall time with any read of the pod blocked, datasets added up).
// A pod without GPUs is never judged. Pure.
#pragma once

#include <chrono>
#include <map>
#include <string>

namespace granary::cache {

struct StarvationThresholds {
  double gpuIdleBelow = 0.5;
  double waitShareAtLeast = 0.1;
};

struct PodSignals {
  double gpuUtilization = 0;               // mean of its GPUs over the interval, 0..1
  std::chrono::nanoseconds readerWait{0};  // cumulative, since its readers began
};

class StarvationMeter {
 public:
  explicit StarvationMeter(StarvationThresholds thresholds = {}) : thresholds_(thresholds) {}

  // Judges the interval that ends now, for the pods ("namespace/name") with GPUs; returns the
  // seconds each was data-starved in it (the interval, or 0). A pod seen for the first time is
  // judged from its next interval on; a pod no longer given is forgotten.
  std::map<std::string, double> observe(const std::map<std::string, PodSignals>& pods,
                                        std::chrono::nanoseconds interval);

 private:
  StarvationThresholds thresholds_;
  std::map<std::string, std::chrono::nanoseconds> lastWait_;
};

}  // namespace granary::cache
