#include "common/metrics_server.h"

#include <civetweb.h>

#include <cstring>

#include "common/process_metrics.h"
#include "common/thread_annotations.h"

namespace granary {

struct MetricsServer::Handlers {
  const MetricsRegistry* registry = nullptr;
  Mutex mutex;
  std::map<std::string, std::function<Status()>> checks GRANARY_GUARDED_BY(mutex);
};

namespace {

void respond(mg_connection* conn, int status, const char* contentType, const std::string& body) {
  mg_printf(
      conn,
      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
      status, mg_get_response_code_text(nullptr, status), contentType, body.size());
  mg_write(conn, body.data(), body.size());
}

int handle(mg_connection* conn, void* data) {
  auto& handlers = *static_cast<MetricsServer::Handlers*>(data);
  const mg_request_info* request = mg_get_request_info(conn);
  const std::string path = request->local_uri ? request->local_uri : "/";
  if (path == "/metrics") {
    std::string body = handlers.registry->exposition();
    if (const auto stats = readProcessStats()) body += processMetricsText(*stats);
    respond(conn, 200, "text/plain; version=0.0.4", body);
    return 200;
  }
  std::function<Status()> check;
  {
    MutexLock lock(handlers.mutex);
    const auto it = handlers.checks.find(path);
    if (it != handlers.checks.end()) check = it->second;
  }
  if (!check) {
    respond(conn, 404, "text/plain", "not found\n");
    return 404;
  }
  const Status status = check();
  const int code = status.isOk() ? 200 : 503;
  respond(conn, code, "text/plain", status.isOk() ? "ok\n" : status.message() + "\n");
  return code;
}

int quiet(const mg_connection*, const char*) { return 1; }  // errors surface as Status

}  // namespace

MetricsServer::~MetricsServer() {
  if (context_) mg_stop(context_);
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& address,
                                                            const MetricsRegistry& registry) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->handlers_ = std::make_unique<Handlers>();
  server->handlers_->registry = &registry;
  mg_init_library(0);
  const char* options[] = {
      "listening_ports", address.c_str(), "num_threads", "4", "enable_keep_alive", "no", nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = quiet;
  server->context_ = mg_start(&callbacks, nullptr, options);
  if (!server->context_) {
    return unavailable("metrics: cannot listen on " + address +
                       "; choose a free port or use port 0");
  }
  mg_set_request_handler(server->context_, "/", handle, server->handlers_.get());
  mg_server_port ports[1];
  if (mg_get_server_ports(server->context_, 1, ports) < 1) {
    return internalError("metrics: listening on " + address + " but no port bound");
  }
  server->port_ = static_cast<uint16_t>(ports[0].port);
  return server;
}

void MetricsServer::addCheck(const std::string& path, std::function<Status()> check) {
  MutexLock lock(handlers_->mutex);
  handlers_->checks[path] = std::move(check);
}

}  // namespace granary
