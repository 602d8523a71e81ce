// The cache node's Prometheus metrics, declared once. The dataset series are labelled with the
// dataset ("namespace/name"); DatasetMetrics holds one dataset's series so the read path never
// looks a label up. The disk series are labelled with the cache directory.
#pragma once

#include <memory>
#include <string>

#include "common/metrics.h"

namespace granary::cache {

struct DatasetMetrics {
  Counter localBytes, peerBytes, originBytes;  // granary_cache_read_bytes_total{source}
  Counter chunkHits, chunkMisses;
  Counter warmBytes, warmFiles;
  Counter originErrors, originRetries;
  Counter damagedChunks;
  Gauge warmRate;     // bytes per second over the last few seconds
  Gauge warmPending;  // owned files the current warm pass has not reached
  Gauge usedBytes, capacityBytes;
  Gauge diskFull;  // 1 while warming waits for room on full cache directories
};

struct CacheMetrics {
  static Result<std::unique_ptr<CacheMetrics>> create(MetricsRegistry& registry);
  DatasetMetrics forDataset(const std::string& dataset) const;

  CounterFamily readBytes;      // {dataset, source}: local | peer | origin
  CounterFamily chunkHits;      // {dataset}
  CounterFamily chunkMisses;    // {dataset}
  CounterFamily warmBytes;      // {dataset}
  CounterFamily warmFiles;      // {dataset}
  CounterFamily originErrors;   // {dataset}
  CounterFamily originRetries;  // {dataset}
  CounterFamily damagedChunks;  // {dataset}
  GaugeFamily warmRate;         // {dataset}
  GaugeFamily warmPending;      // {dataset}
  GaugeFamily usedBytes;        // {dataset}
  GaugeFamily capacityBytes;    // {dataset}
  GaugeFamily diskFull;         // {dataset}
  // The reader series name a reader as dcgm-exporter and kube-state-metrics name a pod: a named
  // pod by namespace and pod name, a pod whose name is not known by namespace "" and its uid, a
  // process outside any pod (local mode) by namespace "" and pod "process:<command>".
  CounterFamily readWait;      // {dataset, namespace, pod}: time reads blocked on misses
  CounterFamily readerBytes;   // {dataset, namespace, pod, source}
  GaugeFamily diskUsedBytes;   // {directory}: each cache directory, from the node's start
  GaugeFamily diskQuotaBytes;  // {directory}
  GaugeFamily cutOffReaders;   // {dataset}: pods whose view of its mount ended
};

}  // namespace granary::cache
