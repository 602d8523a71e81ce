#include "common/metrics_server.h"

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <exception>

namespace granary {

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, uint16_t port)
    : exposer_(std::move(exposer)), port_(port) {}

MetricsServer::~MetricsServer() = default;

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address,
                                                            const MetricsRegistry& registry) {
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return unavailable("metrics: cannot listen on " + address + " (" + e.what() +
                       "); choose a free port or use port 0");
  }
  exposer->RegisterCollectable(registry.prometheusRegistry(), "/metrics");
  const auto ports = exposer->GetListeningPorts();
  if (ports.empty())
    return internalError("metrics: listening on " + address + " but no port bound");
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer), ports.front()));
}

}  // namespace granary
