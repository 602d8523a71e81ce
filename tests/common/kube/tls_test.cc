// The client over TLS: server verification by CA, insecure-skip-tls-verify, client
// certificates, and clear errors when verification fails. Uses its own HTTPS double.
#include <gtest/gtest.h>

#include "common/kube/client.h"
#include "tests/support/api_server_double.h"
#include "tests/support/test_certificates.h"

namespace granary::testing {
namespace {

namespace resources = kube::resources;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto certs = TestCertificates::create();
    ASSERT_TRUE(certs.isOk()) << certs.status();
    certs_ = new TestCertificates(*certs);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(certs_->directory);
    delete certs_;
  }

  std::unique_ptr<ApiServerDouble> serve(bool requireClientCertificate) {
    auto server = ApiServerDouble::start(
        {.tlsCertificateFile = certs_->serverPemFile,
         .clientCaFile = requireClientCertificate ? certs_->caFile : std::filesystem::path()});
    EXPECT_TRUE(server.isOk()) << server.status();
    return server.isOk() ? std::move(*server) : nullptr;
  }

  static Status get(const kube::RestConfig& config) {
    auto client = kube::Client::create(config, {.maxAttempts = 1});
    if (!client.isOk()) return client.status();
    return (*client)->get(resources::namespaces(), "", "default").status();
  }

  static TestCertificates* certs_;
};

TestCertificates* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, VerifiesTheServerAgainstTheConfiguredCa) {
  auto server = serve(false);
  ASSERT_NE(server, nullptr);
  kube::RestConfig config = server->restConfig();
  EXPECT_EQ(config.server.rfind("https://", 0), 0u);
  config.caPem = certs_->caPem;
  EXPECT_TRUE(get(config).isOk()) << get(config);
}

TEST_F(TlsTest, UnknownCaIsAClearErrorUnlessVerificationIsSkipped) {
  auto server = serve(false);
  ASSERT_NE(server, nullptr);
  kube::RestConfig config = server->restConfig();  // no CA: the system's roots do not know it
  const Status refused = get(config);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("GET /api/v1/namespaces/default"), std::string::npos) << refused;
  config.insecureSkipTlsVerify = true;
  EXPECT_TRUE(get(config).isOk()) << get(config);
}

TEST_F(TlsTest, ClientCertificatesWhenTheServerDemandsThem) {
  auto server = serve(true);
  ASSERT_NE(server, nullptr);
  kube::RestConfig config = server->restConfig();
  config.caPem = certs_->caPem;
  EXPECT_EQ(get(config).code(), StatusCode::kUnavailable) << "no client certificate";
  config.clientCertPem = certs_->clientCertPem;
  config.clientKeyPem = Secret(certs_->clientKeyPem);
  EXPECT_TRUE(get(config).isOk()) << get(config);
}

}  // namespace
}  // namespace granary::testing
