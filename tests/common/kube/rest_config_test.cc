#include "common/kube/rest_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace granary::kube {
namespace {

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("granary_kubeconfig_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string& name, const std::string& text) {
    std::ofstream out(dir_ / name);
    out << text;
    return dir_ / name;
  }

  std::filesystem::path dir_;
};

// "-----BEGIN CERTIFICATE-----\nCA\n" in base64.
constexpr const char* kCaBase64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg==";

TEST_F(KubeconfigTest, CurrentContextWithDataAndToken) {
  auto path = write("config", std::string(R"(
apiVersion: v1
kind: Config
current-context: dev
contexts:
  - name: dev
    context: {cluster: c1, user: u1, namespace: ml}
  - name: other
    context: {cluster: c2, user: u2}
clusters:
  - name: c1
    cluster: {server: "https://10.0.0.1:6443/", certificate-authority-data: )") +
                                  kCaBase64 + R"(}
  - name: c2
    cluster: {server: "http://127.0.0.1:8080", insecure-skip-tls-verify: true}
users:
  - name: u1
    user: {token: s3cret}
  - name: u2
    user: {client-certificate: certs/u2.crt, client-key: certs/u2.key}
)");
  std::filesystem::create_directories(dir_ / "certs");
  write("certs/u2.crt", "CERT");
  write("certs/u2.key", "KEY");

  auto dev = loadKubeconfig(path);
  ASSERT_TRUE(dev.isOk()) << dev.status();
  EXPECT_EQ(dev->server, "https://10.0.0.1:6443");
  EXPECT_EQ(dev->caPem, "-----BEGIN CERTIFICATE-----\nCA\n");
  EXPECT_EQ(dev->bearerToken.reveal(), "s3cret");
  EXPECT_EQ(dev->namespace_, "ml");
  EXPECT_FALSE(dev->insecureSkipTlsVerify);

  auto other = loadKubeconfig(path, "other");
  ASSERT_TRUE(other.isOk()) << other.status();
  EXPECT_EQ(other->clientCertPem, "CERT");
  EXPECT_EQ(other->clientKeyPem.reveal(), "KEY");
  EXPECT_TRUE(other->insecureSkipTlsVerify);
  EXPECT_EQ(other->namespace_, "default");
}

TEST_F(KubeconfigTest, ErrorsNameWhatIsMissing) {
  auto path = write("config", R"(
current-context: dev
contexts: [{name: dev, context: {cluster: nowhere, user: u}}]
clusters: [{name: c, cluster: {server: "https://x"}}]
users: [{name: u, user: {exec: {command: aws}}}]
)");
  auto missing = loadKubeconfig(path);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("clusters: no entry named \"nowhere\""),
            std::string::npos);

  EXPECT_NE(loadKubeconfig(path, "staging")
                .status()
                .message()
                .find("contexts: no entry named \"staging\""),
            std::string::npos);

  auto exec = write("exec", R"(
current-context: dev
contexts: [{name: dev, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://x"}}]
users: [{name: u, user: {exec: {command: aws}}}]
)");
  EXPECT_NE(loadKubeconfig(exec).status().message().find("credential plugins are not supported"),
            std::string::npos);

  auto noServer = write("noserver", R"(
current-context: dev
contexts: [{name: dev, context: {cluster: c}}]
clusters: [{name: c, cluster: {server: "10.0.0.1"}}]
)");
  EXPECT_NE(loadKubeconfig(noServer).status().message().find("server: expected an http(s):// URL"),
            std::string::npos);

  auto badData = write("baddata", R"(
current-context: dev
contexts: [{name: dev, context: {cluster: c}}]
clusters: [{name: c, cluster: {server: "https://x", certificate-authority-data: "!!notbase64!!"}}]
)");
  EXPECT_NE(loadKubeconfig(badData).status().message().find("base64"), std::string::npos);

  EXPECT_EQ(loadKubeconfig(dir_ / "absent").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(loadKubeconfig(write("garbage", "{{{")).isOk());
}

TEST_F(KubeconfigTest, InClusterReadsTheServiceAccount) {
  write("token", "tok\n");
  write("ca.crt", "CA");
  write("namespace", "granary-system\n");
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto config = inClusterConfig(dir_);
  unsetenv("KUBERNETES_SERVICE_HOST");
  ASSERT_TRUE(config.isOk()) << config.status();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->tokenFile, dir_ / "token");
  EXPECT_EQ(config->caPem, "CA");
  EXPECT_EQ(config->namespace_, "granary-system");

  auto outside = inClusterConfig(dir_);
  EXPECT_EQ(outside.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(outside.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  unsetenv("KUBERNETES_SERVICE_PORT");
}

}  // namespace
}  // namespace granary::kube
