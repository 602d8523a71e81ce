#include "engine/cache_metrics.h"

namespace granary::cache {
namespace {

MetricSpec counter(std::string name, MetricUnit unit, std::string help,
                   std::vector<std::string> labels = {"dataset"}) {
  return {.name = std::move(name),
          .type = MetricType::kCounter,
          .unit = unit,
          .help = std::move(help),
          .labels = std::move(labels)};
}

MetricSpec gauge(std::string name, MetricUnit unit, std::string help,
                 std::vector<std::string> labels = {"dataset"}) {
  return {.name = std::move(name),
          .type = MetricType::kGauge,
          .unit = unit,
          .help = std::move(help),
          .labels = std::move(labels)};
}

}  // namespace

Result<std::unique_ptr<CacheMetrics>> CacheMetrics::create(MetricsRegistry& registry) {
  using U = MetricUnit;
  GRANARY_ASSIGN_OR_RETURN(
      auto readBytes,
      registry.addCounter(counter("granary_cache_read_bytes_total", U::kBytes,
                                  "Bytes served to readers, by where they came from: local disk, "
                                  "a peer cache node, or the origin.",
                                  {"dataset", "source"})));
  GRANARY_ASSIGN_OR_RETURN(
      auto hits, registry.addCounter(counter("granary_cache_chunk_hits_total", U::kNone,
                                             "Chunk reads served from this node's disks.")));
  GRANARY_ASSIGN_OR_RETURN(auto misses,
                           registry.addCounter(counter("granary_cache_chunk_misses_total", U::kNone,
                                                       "Chunk reads that had to be fetched.")));
  GRANARY_ASSIGN_OR_RETURN(auto warmBytes,
                           registry.addCounter(counter("granary_cache_warm_bytes_total", U::kBytes,
                                                       "Bytes fetched and stored by warming.")));
  GRANARY_ASSIGN_OR_RETURN(auto warmFiles,
                           registry.addCounter(counter("granary_cache_warm_files_total", U::kNone,
                                                       "Files completed by warming.")));
  GRANARY_ASSIGN_OR_RETURN(
      auto originErrors,
      registry.addCounter(counter("granary_cache_origin_errors_total", U::kNone,
                                  "Origin reads that failed after their retries.")));
  GRANARY_ASSIGN_OR_RETURN(
      auto originRetries,
      registry.addCounter(counter("granary_cache_origin_retries_total", U::kNone,
                                  "Origin requests retried after a transient failure.")));
  GRANARY_ASSIGN_OR_RETURN(
      auto damaged,
      registry.addCounter(counter("granary_cache_damaged_chunks_total", U::kNone,
                                  "Cached chunks that failed their checksum when read: each was "
                                  "dropped and fetched again, never served.")));
  GRANARY_ASSIGN_OR_RETURN(
      auto warmRate,
      registry.addGauge(gauge("granary_cache_warm_rate_bytes", U::kBytes,
                              "How fast this node fetches its share of the dataset (from the "
                              "origin or peers, by warming and by readers' misses; never what "
                              "was on disk already), in bytes per second over the last 5 s.")));
  GRANARY_ASSIGN_OR_RETURN(
      auto warmPending,
      registry.addGauge(gauge("granary_cache_warm_pending_files", U::kNone,
                              "Owned files the warm pass has not reached yet (its queue).")));
  GRANARY_ASSIGN_OR_RETURN(auto used,
                           registry.addGauge(gauge("granary_cache_used_bytes", U::kBytes,
                                                   "Bytes of the dataset cached on this node.")));
  GRANARY_ASSIGN_OR_RETURN(auto capacity,
                           registry.addGauge(gauge("granary_cache_capacity_bytes", U::kBytes,
                                                   "The dataset's cache quota on this node.")));
  GRANARY_ASSIGN_OR_RETURN(
      auto diskFull,
      registry.addGauge(gauge("granary_cache_disk_full", U::kNone,
                              "1 while the dataset's warming waits for room on full cache "
                              "directories (reads are served from the origin meanwhile).")));
  GRANARY_ASSIGN_OR_RETURN(
      auto readWait,
      registry.addCounter(counter("granary_dataset_read_wait_seconds_total", U::kSeconds,
                                  "Wall time during which a reader had a read through a "
                                  "dataset's mount blocked on data that was not on this node's "
                                  "disks; reads that wait together count once. The reader is a "
                                  "pod (its namespace and name; an empty namespace and its uid "
                                  "when its name is not known) or, in local mode, a process (an "
                                  "empty namespace and process:<command>).",
                                  {"dataset", "namespace", "pod"})));
  GRANARY_ASSIGN_OR_RETURN(
      auto readerBytes,
      registry.addCounter(counter("granary_dataset_read_bytes_total", U::kBytes,
                                  "Bytes read through a dataset's mount per reader (namespace and "
                                  "pod, as in granary_dataset_read_wait_seconds_total), by where "
                                  "they came from: local disk, a peer cache node, or the origin.",
                                  {"dataset", "namespace", "pod", "source"})));
  GRANARY_ASSIGN_OR_RETURN(
      auto diskUsed,
      registry.addGauge(gauge("granary_cache_disk_used_bytes", U::kBytes,
                              "Bytes of chunks on a cache directory, every dataset together.",
                              {"directory"})));
  GRANARY_ASSIGN_OR_RETURN(
      auto diskQuota,
      registry.addGauge(gauge("granary_cache_disk_quota_bytes", U::kBytes,
                              "A cache directory's quota: what chunks may take there.",
                              {"directory"})));
  GRANARY_ASSIGN_OR_RETURN(
      auto cutOff,
      registry.addGauge(gauge("granary_dataset_readers_cut_off", U::kNone,
                              "Pods on this node whose view of the dataset's mount ended (the "
                              "node's pod was replaced without handing over, or killed hard): "
                              "their reads fail until they are restarted.",
                              {"dataset"})));
  return std::unique_ptr<CacheMetrics>(new CacheMetrics{
      readBytes, hits, misses, warmBytes, warmFiles, originErrors, originRetries, damaged, warmRate,
      warmPending, used, capacity, diskFull, readWait, readerBytes, diskUsed, diskQuota, cutOff});
}

DatasetMetrics CacheMetrics::forDataset(const std::string& dataset) const {
  return {readBytes.with({dataset, "local"}),
          readBytes.with({dataset, "peer"}),
          readBytes.with({dataset, "origin"}),
          chunkHits.with({dataset}),
          chunkMisses.with({dataset}),
          warmBytes.with({dataset}),
          warmFiles.with({dataset}),
          originErrors.with({dataset}),
          originRetries.with({dataset}),
          damagedChunks.with({dataset}),
          warmRate.with({dataset}),
          warmPending.with({dataset}),
          usedBytes.with({dataset}),
          capacityBytes.with({dataset}),
          diskFull.with({dataset})};
}

}  // namespace granary::cache
