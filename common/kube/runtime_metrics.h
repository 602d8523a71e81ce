// The metrics of the controller runtime, declared once per process.
#pragma once

#include <memory>

#include "common/kube/client.h"
#include "common/metrics.h"

namespace granary::kube {

struct RuntimeMetrics {
  // Declares every metric below in `registry`.
  static Result<RuntimeMetrics> declare(MetricsRegistry& registry);

  CounterFamily reconciles;           // {controller, result}: success | requeue | error | terminal
  HistogramFamily reconcileDuration;  // {controller}
  GaugeFamily queueDepth;             // {controller}
  HistogramFamily queueLatency;       // {controller}: ready → handed to a worker
  CounterFamily queueRetries;         // {controller}: rate-limited re-adds
  CounterFamily watchRestarts;        // {resource}
  CounterFamily relists;              // {resource}
  GaugeFamily leader;                 // {lease}: 1 while this process holds the lease
};

// A client whose requests are counted in `registry` as granary_kube_requests_total{method,
// code} (code "0" when no response came). AlreadyExists when the registry counts another.
Result<std::unique_ptr<Client>> createCountedClient(RestConfig config, MetricsRegistry& registry);

}  // namespace granary::kube
