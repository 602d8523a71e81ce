// The node's checkpoint volumes as Prometheus series, labelled {namespace, uri}: bytes written
// into each volume, copied to peers, uploaded to its origin and dropped to make room, what waits
// for the origin and for how long (the upload lag), and what a restore under way has still to
// bring. Refreshed from CheckpointVolumes::states() on the node's tick; a volume closed loses its
// gauges.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache-node/csi/checkpoint_volumes.h"
#include "common/metrics.h"

namespace granary::cache {

class CheckpointMetrics {
 public:
  static Result<std::unique_ptr<CheckpointMetrics>> create(MetricsRegistry& registry);

  void update(const std::vector<CheckpointVolumeState>& volumes);

 private:
  struct Families {
    CounterFamily written, uploaded, copied, evicted;  // bytes
    GaugeFamily pendingBytes, lag, restoringBytes;
  };
  explicit CheckpointMetrics(Families families) : families_(std::move(families)) {}

  Families families_;
  // What each volume's drain had counted when last seen (a drain opened again counts from 0).
  std::map<std::vector<std::string>, checkpoint::DrainStatus> seen_;
};

}  // namespace granary::cache
