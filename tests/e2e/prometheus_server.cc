#include "tests/e2e/prometheus_server.h"

#include <curl/curl.h>

#include "common/status.h"
#include "tests/support/eventually.h"
#include "tests/support/free_port.h"
#include "tests/support/http_get.h"

namespace granary::testing {
namespace {

std::string escaped(const std::string& text) {
  CURL* curl = curl_easy_init();
  char* out = curl_easy_escape(curl, text.c_str(), static_cast<int>(text.size()));
  std::string result = out != nullptr ? out : "";
  curl_free(out);
  curl_easy_cleanup(curl);
  return result;
}

std::string unixSeconds(std::chrono::system_clock::time_point at) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
  return std::to_string(ms / 1000) + "." + std::to_string(1000 + ms % 1000).substr(1);
}

}  // namespace

Result<std::unique_ptr<PrometheusServer>> PrometheusServer::start(
    const std::filesystem::path& binary, const std::filesystem::path& config,
    const std::filesystem::path& directory) {
  std::unique_ptr<PrometheusServer> server(new PrometheusServer());
  server->directory_ = directory;
  std::filesystem::create_directories(directory / "data");
  const std::string address = "127.0.0.1:" + std::to_string(freePort());
  server->url_ = "http://" + address;
  server->process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{binary.string(), "--config.file=" + config.string(),
                               "--storage.tsdb.path=" + (directory / "data").string(),
                               "--web.listen-address=" + address, "--log.level=warn"},
      directory / "prometheus.log");
  server->process_->start();
  bool ready = false;
  eventually(
      [&] {
        std::string body;
        ready = httpGet(server->url_ + "/-/ready", body) == 200;
        return ready || !server->process_->running();
      },
      std::chrono::seconds(30));
  if (ready) return server;
  return unavailable("prometheus did not get ready on " + address + "; its log:\n" +
                     server->process_->log());
}

PrometheusServer::~PrometheusServer() {
  process_->stop(SIGKILL);
  std::error_code ignored;
  std::filesystem::remove_all(directory_ / "data", ignored);
}

Result<kube::Json> PrometheusServer::api(const std::string& pathAndQuery) const {
  std::string body;
  const long code = httpGet(url_ + pathAndQuery, body);
  if (code == 0) return unavailable("prometheus at " + url_ + " does not answer");
  kube::Json reply;
  try {
    reply = kube::Json::parse(body);
  } catch (const std::exception&) {
    return internalError("prometheus answered HTTP " + std::to_string(code) +
                         " with no JSON: " + body);
  }
  if (reply.has_string_field("status") && reply.at("status").as_string() == "success")
    return reply.at("data");
  const std::string type =
      reply.has_string_field("errorType") ? reply.at("errorType").as_string() : "";
  const std::string error = reply.has_string_field("error") ? reply.at("error").as_string() : body;
  return invalidArgument(type + ": " + error);
}

Result<kube::Json> PrometheusServer::query(const std::string& expr) const {
  return api("/api/v1/query?query=" + escaped(expr));
}

Result<kube::Json> PrometheusServer::queryRange(const std::string& expr,
                                                std::chrono::system_clock::time_point start,
                                                std::chrono::system_clock::time_point end,
                                                std::chrono::seconds step) const {
  return api("/api/v1/query_range?query=" + escaped(expr) + "&start=" + unixSeconds(start) +
             "&end=" + unixSeconds(end) + "&step=" + std::to_string(step.count()));
}

Result<kube::Json> PrometheusServer::get(const std::string& path) const { return api(path); }

size_t seriesCount(const kube::Json& data) {
  if (!data.has_string_field("resultType")) return 0;
  const std::string type = data.at("resultType").as_string();
  if (type == "scalar" || type == "string") return 1;
  return data.has_array_field("result") ? data.at("result").size() : 0;
}

}  // namespace granary::testing
