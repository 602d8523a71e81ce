#include "cache-node/checkpoint_metrics.h"

#include <set>

namespace granary::cache {
namespace {

MetricSpec spec(std::string name, MetricType type, MetricUnit unit, std::string help) {
  return {.name = std::move(name),
          .type = type,
          .unit = unit,
          .help = std::move(help),
          .labels = {"namespace", "uri"}};
}

// What the counter should add: the growth since last seen, or all of it after a restart.
double growth(int64_t now, int64_t before) {
  return static_cast<double>(now >= before ? now - before : now);
}

}  // namespace

Result<std::unique_ptr<CheckpointMetrics>> CheckpointMetrics::create(MetricsRegistry& registry) {
  using T = MetricType;
  using U = MetricUnit;
  GRANARY_ASSIGN_OR_RETURN(
      auto written,
      registry.addCounter(spec("granary_checkpoint_written_bytes_total", T::kCounter, U::kBytes,
                               "Bytes of checkpoint files closed in the volume on "
                               "this node (restored files not counted).")));
  GRANARY_ASSIGN_OR_RETURN(
      auto uploaded,
      registry.addCounter(spec("granary_checkpoint_uploaded_bytes_total", T::kCounter, U::kBytes,
                               "Bytes of checkpoint files this node uploaded to the origin.")));
  GRANARY_ASSIGN_OR_RETURN(
      auto copied,
      registry.addCounter(spec("granary_checkpoint_copied_bytes_total", T::kCounter, U::kBytes,
                               "Bytes of checkpoint files this node copied to its peers (once "
                               "a file, whatever their number).")));
  GRANARY_ASSIGN_OR_RETURN(
      auto evicted,
      registry.addCounter(spec("granary_checkpoint_evicted_bytes_total", T::kCounter, U::kBytes,
                               "Bytes of checkpoint files at the origin this node dropped to "
                               "make room on a full disk.")));
  GRANARY_ASSIGN_OR_RETURN(
      auto pendingBytes,
      registry.addGauge(spec("granary_checkpoint_pending_bytes", T::kGauge, U::kBytes,
                             "Bytes of closed checkpoint files not at the origin yet.")));
  GRANARY_ASSIGN_OR_RETURN(
      auto lag,
      registry.addGauge(spec("granary_checkpoint_upload_lag_seconds", T::kGauge, U::kSeconds,
                             "Age of the oldest closed checkpoint file not at the "
                             "origin yet (0 when everything is there).")));
  GRANARY_ASSIGN_OR_RETURN(
      auto restoring,
      registry.addGauge(spec("granary_checkpoint_restore_remaining_bytes", T::kGauge, U::kBytes,
                             "Bytes a restore under way has still to bring from the origin.")));
  return std::unique_ptr<CheckpointMetrics>(
      new CheckpointMetrics({written, uploaded, copied, evicted, pendingBytes, lag, restoring}));
}

void CheckpointMetrics::update(const std::vector<CheckpointVolumeState>& volumes) {
  std::set<std::vector<std::string>> present;
  for (const CheckpointVolumeState& v : volumes) {
    const std::vector<std::string> labels{v.ns, v.uri};
    present.insert(labels);
    checkpoint::DrainStatus& before = seen_[labels];
    families_.restoringBytes.with(labels).set(
        v.restoring ? static_cast<double>(v.restoring->totalBytes - v.restoring->bytes) : 0);
    if (!v.drain) continue;
    const checkpoint::DrainStatus& d = *v.drain;
    families_.written.with(labels).increment(growth(d.writtenBytes, before.writtenBytes));
    families_.uploaded.with(labels).increment(growth(d.uploadedBytes, before.uploadedBytes));
    families_.copied.with(labels).increment(growth(d.copiedBytes, before.copiedBytes));
    families_.evicted.with(labels).increment(growth(d.evictedBytes, before.evictedBytes));
    families_.pendingBytes.with(labels).set(static_cast<double>(d.pendingBytes));
    families_.lag.with(labels).set(d.lag.count());
    before = d;
  }
  for (auto it = seen_.begin(); it != seen_.end();) {
    if (present.contains(it->first)) {
      ++it;
      continue;
    }
    for (const GaugeFamily* gauge :
         {&families_.pendingBytes, &families_.lag, &families_.restoringBytes})
      gauge->remove(it->first);
    it = seen_.erase(it);
  }
}

}  // namespace granary::cache
