#include "common/metrics_server.h"

#include <gtest/gtest.h>

#include <atomic>

#include "tests/support/http_get.h"

namespace granary {
namespace {

using testing::httpGet;

TEST(MetricsServer, ServesTheRegistryOverHttp) {
  MetricsRegistry registry;
  auto warmed = registry.addCounter({.name = "granary_warm_bytes_total",
                                     .type = MetricType::kCounter,
                                     .unit = MetricUnit::kBytes,
                                     .help = "Bytes warmed from origins and peers."});
  ASSERT_TRUE(warmed.isOk());
  warmed->with({}).increment(12345);

  auto server = MetricsServer::start("127.0.0.1:0", registry);
  ASSERT_TRUE(server.isOk()) << server.status();
  ASSERT_NE((*server)->port(), 0);

  std::string body;
  const std::string url = "http://127.0.0.1:" + std::to_string((*server)->port()) + "/metrics";
  EXPECT_EQ(httpGet(url, body), 200);
  EXPECT_NE(body.find("granary_warm_bytes_total 12345"), std::string::npos) << body;
}

TEST(MetricsServer, HealthChecksAnswer200Or503WithTheReason) {
  MetricsRegistry registry;
  auto server = MetricsServer::start("127.0.0.1:0", registry);
  ASSERT_TRUE(server.isOk()) << server.status();
  std::atomic<bool> ready{false};
  (*server)->addCheck("/healthz", [] { return Status::ok(); });
  (*server)->addCheck(
      "/readyz", [&] { return ready ? Status::ok() : unavailable("informers have not synced"); });
  const std::string base = "http://127.0.0.1:" + std::to_string((*server)->port());
  std::string body;
  EXPECT_EQ(httpGet(base + "/healthz", body), 200);
  EXPECT_EQ(body, "ok\n");
  body.clear();
  EXPECT_EQ(httpGet(base + "/readyz", body), 503);
  EXPECT_EQ(body, "informers have not synced\n");
  ready = true;
  body.clear();
  EXPECT_EQ(httpGet(base + "/readyz", body), 200);
  body.clear();
  EXPECT_EQ(httpGet(base + "/nothing", body), 404);
}

TEST(MetricsServer, ABusyPortIsAnErrorNotACrash) {
  MetricsRegistry registry;
  auto first = MetricsServer::start("127.0.0.1:0", registry);
  ASSERT_TRUE(first.isOk()) << first.status();
  const std::string address = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = MetricsServer::start(address, registry);
  ASSERT_FALSE(second.isOk());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(address), std::string::npos);
}

}  // namespace
}  // namespace granary
