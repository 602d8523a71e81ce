// A real Prometheus for end-to-end tests: the binary started on a free loopback port with a
// configuration file and its own storage directory, and its HTTP API (instant and range
// queries, alerts) as JSON. Killed and its storage removed when the object goes.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "common/kube/object.h"
#include "common/result.h"
#include "tests/support/child_process.h"

namespace granary::testing {

class PrometheusServer {
 public:
  // Starts `binary` with `config`, storing under `directory` (created; its log there too) and
  // waits up to 30 s for /-/ready. Unavailable, with the log's end, when it does not get ready.
  static Result<std::unique_ptr<PrometheusServer>> start(const std::filesystem::path& binary,
                                                         const std::filesystem::path& config,
                                                         const std::filesystem::path& directory);
  ~PrometheusServer();

  // http://127.0.0.1:<port>
  const std::string& url() const { return url_; }
  std::string log() const { return process_->log(); }

  // The `data` of /api/v1/query for `expr` now. InvalidArgument with Prometheus' message when
  // the expression does not parse or evaluate; Unavailable when Prometheus does not answer.
  Result<kube::Json> query(const std::string& expr) const;
  // The `data` of /api/v1/query_range over [start, end] every `step`; errors as query().
  Result<kube::Json> queryRange(const std::string& expr,
                                std::chrono::system_clock::time_point start,
                                std::chrono::system_clock::time_point end,
                                std::chrono::seconds step) const;
  // The `data` of a GET of `path` (e.g. "/api/v1/alerts"); errors as query().
  Result<kube::Json> get(const std::string& path) const;

 private:
  PrometheusServer() = default;
  Result<kube::Json> api(const std::string& pathAndQuery) const;

  std::filesystem::path directory_;
  std::string url_;
  std::unique_ptr<ChildProcess> process_;
};

// Series of an instant-query `data` (a vector or matrix's results; a scalar or string is one).
size_t seriesCount(const kube::Json& data);

}  // namespace granary::testing
