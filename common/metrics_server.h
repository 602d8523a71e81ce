// Serves a MetricsRegistry at http://<address>/metrics (Prometheus text format).
// Stops serving when destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/result.h"

namespace prometheus {
class Exposer;
}

namespace granary {

class MetricsServer {
 public:
  // `address` is host:port; port 0 picks a free port (see port()). Unavailable when the
  // address cannot be bound. The registry must outlive the server.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address,
                                                      const MetricsRegistry& registry);
  ~MetricsServer();

  // The port actually bound.
  uint16_t port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, uint16_t port);
  std::unique_ptr<prometheus::Exposer> exposer_;
  uint16_t port_;
};

}  // namespace granary
