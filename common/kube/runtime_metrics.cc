#include "common/kube/runtime_metrics.h"

namespace granary::kube {

Result<RuntimeMetrics> RuntimeMetrics::declare(MetricsRegistry& registry) {
  GRANARY_ASSIGN_OR_RETURN(
      auto reconciles,
      registry.addCounter(
          {.name = "granary_controller_reconciles_total",
           .type = MetricType::kCounter,
           .help = "Reconciles by controller and result (success, requeue, error, terminal).",
           .labels = {"controller", "result"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto duration, registry.addHistogram({.name = "granary_controller_reconcile_duration_seconds",
                                            .type = MetricType::kHistogram,
                                            .unit = MetricUnit::kSeconds,
                                            .help = "Time one reconcile took.",
                                            .labels = {"controller"}}));
  GRANARY_ASSIGN_OR_RETURN(auto depth,
                           registry.addGauge({.name = "granary_workqueue_depth",
                                              .type = MetricType::kGauge,
                                              .help = "Keys ready and waiting for a worker.",
                                              .labels = {"controller"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto latency,
      registry.addHistogram({.name = "granary_workqueue_queue_duration_seconds",
                             .type = MetricType::kHistogram,
                             .unit = MetricUnit::kSeconds,
                             .help = "Time a ready key waited before a worker took it.",
                             .labels = {"controller"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto retries, registry.addCounter({.name = "granary_workqueue_retries_total",
                                         .type = MetricType::kCounter,
                                         .help = "Keys re-queued with backoff after a failure.",
                                         .labels = {"controller"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto restarts,
      registry.addCounter({.name = "granary_informer_watch_restarts_total",
                           .type = MetricType::kCounter,
                           .help = "Watches resumed after the server ended or dropped them.",
                           .labels = {"resource"}}));
  GRANARY_ASSIGN_OR_RETURN(auto relists,
                           registry.addCounter({.name = "granary_informer_relists_total",
                                                .type = MetricType::kCounter,
                                                .help = "Full re-lists (resourceVersion too old).",
                                                .labels = {"resource"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto leader, registry.addGauge({.name = "granary_leader_election_leader",
                                      .type = MetricType::kGauge,
                                      .help = "1 while this process holds the lease, else 0.",
                                      .labels = {"lease"}}));
  return RuntimeMetrics{reconciles, duration, depth, latency, retries, restarts, relists, leader};
}

Result<std::unique_ptr<Client>> createCountedClient(RestConfig config, MetricsRegistry& registry) {
  GRANARY_ASSIGN_OR_RETURN(
      auto requests,
      registry.addCounter({.name = "granary_kube_requests_total",
                           .type = MetricType::kCounter,
                           .help = "Requests to the Kubernetes API (watches excepted) by HTTP "
                                   "method and status code (0: no response).",
                           .labels = {"method", "code"}}));
  return Client::create(std::move(config), {.onResponse = [requests](const std::string& method,
                                                                     const std::string&, int code) {
                          requests.with({method, std::to_string(code)}).increment();
                        }});
}

}  // namespace granary::kube
