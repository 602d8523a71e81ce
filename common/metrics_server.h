// The HTTP endpoints every granary binary serves: /metrics (the registry, Prometheus text
// format) and health checks such as /healthz and /readyz (200 "ok" when the check passes, 503
// with its message when not). Stops serving when destroyed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/metrics.h"
#include "common/result.h"

struct mg_context;

namespace granary {

class MetricsServer {
 public:
  // `address` is host:port; port 0 picks a free port (see port()). Unavailable when the
  // address cannot be bound. The registry must outlive the server.
  static Result<std::unique_ptr<MetricsServer>> start(const std::string& address,
                                                      const MetricsRegistry& registry);
  ~MetricsServer();

  // Serves `path` from `check`. The check runs on a server thread and must be thread-safe.
  void addCheck(const std::string& path, std::function<Status()> check);

  // The port actually bound.
  uint16_t port() const { return port_; }

  struct Handlers;

 private:
  MetricsServer() = default;
  mg_context* context_ = nullptr;
  uint16_t port_ = 0;
  std::unique_ptr<Handlers> handlers_;
};

}  // namespace granary
