#include "tests/kube/cluster.h"

#include <cpprest/asyncrt_utils.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "common/kube/yaml_json.h"

namespace granary::testing {

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

Result<kube::Json> edit(kube::Client& client, const kube::ResourceType& type, const std::string& ns,
                        const std::string& name, const std::function<void(kube::Json&)>& change) {
  for (int attempt = 1;; ++attempt) {
    auto object = client.get(type, ns, name);
    if (!object.isOk()) return object.status();
    kube::Json changed = *object;
    change(changed);
    auto written = client.update(type, changed);
    if (written.isOk() || written.status().code() != StatusCode::kConflict || attempt == 10)
      return written;
  }
}

Status writeKubeconfig(const kube::RestConfig& config, const std::string& ns,
                       const std::filesystem::path& path) {
  const auto base64 = [](const std::string& pem) {
    return kube::Json::string(
        utility::conversions::to_base64(std::vector<unsigned char>(pem.begin(), pem.end())));
  };
  kube::Json cluster = kube::Json::object();
  cluster["server"] = kube::Json::string(config.server);
  if (!config.caPem.empty()) cluster["certificate-authority-data"] = base64(config.caPem);
  if (config.insecureSkipTlsVerify) cluster["insecure-skip-tls-verify"] = kube::Json::boolean(true);
  kube::Json user = kube::Json::object();
  if (!config.bearerToken.empty()) user["token"] = kube::Json::string(config.bearerToken.reveal());
  if (!config.tokenFile.empty()) user["tokenFile"] = kube::Json::string(config.tokenFile.string());
  if (!config.clientCertPem.empty()) {
    user["client-certificate-data"] = base64(config.clientCertPem);
    user["client-key-data"] = base64(config.clientKeyPem.reveal());
  }
  kube::Json context = kube::Json::object();
  context["cluster"] = kube::Json::string("test");
  context["user"] = kube::Json::string("test");
  context["namespace"] = kube::Json::string(ns);
  kube::Json file = kube::Json::object();
  file["apiVersion"] = kube::Json::string("v1");
  file["kind"] = kube::Json::string("Config");
  file["clusters"][0]["name"] = kube::Json::string("test");
  file["clusters"][0]["cluster"] = cluster;
  file["users"][0]["name"] = kube::Json::string("test");
  file["users"][0]["user"] = user;
  file["contexts"][0]["name"] = kube::Json::string("test");
  file["contexts"][0]["context"] = context;
  file["current-context"] = kube::Json::string("test");
  std::ofstream out(path);
  out << file.serialize() << "\n";
  return out ? Status::ok() : unavailable("cannot write " + path.string());
}

namespace {

std::filesystem::path sourceDir() { return GRANARY_SOURCE_DIR; }

// Creates the CRDs of crds/ (AlreadyExists is fine) and waits until they are served.
void installCrds(kube::Client& client) {
  for (const auto& entry : std::filesystem::directory_iterator(sourceDir() / "crds")) {
    auto documents = config::loadFile(entry.path());
    ASSERT_TRUE(documents.isOk()) << documents.status();
    for (const auto& document : *documents) {
      auto created =
          client.create(kube::resources::customResourceDefinitions(), "", kube::toJson(document));
      ASSERT_TRUE(created.isOk() || created.status().code() == StatusCode::kAlreadyExists)
          << created.status();
    }
  }
  for (const auto* type : {&kube::resources::datasets(), &kube::resources::trainingJobs()}) {
    ASSERT_TRUE(eventually([&] { return client.list(*type, "default", {.limit = 1}).isOk(); },
                           std::chrono::seconds(60)))
        << type->plural << " never became served";
  }
}

}  // namespace

kube::Json yaml(const std::string& text) {
  auto node = config::parse(text, "test");
  EXPECT_TRUE(node.isOk()) << node.status();
  return node.isOk() ? kube::toJson(*node) : kube::Json::null();
}

TestCluster* TestCluster::shared() {
  static std::unique_ptr<TestCluster> cluster = []() -> std::unique_ptr<TestCluster> {
    std::unique_ptr<TestCluster> c(new TestCluster());
    if (const char* kubeconfig = std::getenv("GRANARY_TEST_KUBECONFIG");
        kubeconfig && *kubeconfig) {
      auto config = kube::loadKubeconfig(kubeconfig);
      EXPECT_TRUE(config.isOk()) << config.status();
      if (!config.isOk()) return nullptr;
      c->config_ = *config;
    } else {
      auto server =
          ApiServerDouble::start({.token = "test-token", .crdDirectory = sourceDir() / "crds"});
      EXPECT_TRUE(server.isOk()) << server.status();
      if (!server.isOk()) return nullptr;
      c->double_ = std::move(*server);
      c->config_ = c->double_->restConfig();
    }
    auto client =
        kube::Client::create(c->config_, {.backoff = {.initial = std::chrono::milliseconds(10),
                                                      .max = std::chrono::milliseconds(200)}});
    EXPECT_TRUE(client.isOk()) << client.status();
    if (!client.isOk()) return nullptr;
    c->client_ = std::move(*client);
    installCrds(*c->client_);
    return c;
  }();
  return cluster.get();
}

Result<std::string> TestCluster::createNamespace() {
  static std::mt19937 random(std::random_device{}());
  const std::string name = "granary-test-" + std::to_string(random() % 100000000);
  GRANARY_RETURN_IF_ERROR(
      client_->create(kube::resources::namespaces(), "", yaml("metadata: {name: " + name + "}"))
          .status());
  return name;
}

void TestCluster::deleteNamespace(const std::string& name) {
  (void)client_->remove(kube::resources::namespaces(), "", name);
}

void TestCluster::clearFaults() {
  if (!double_) return;
  double_->failNextRequests(0, 500);
  double_->setLatency(std::chrono::milliseconds(0));
}

void ClusterTest::SetUp() {
  cluster_ = TestCluster::shared();
  ASSERT_NE(cluster_, nullptr);
  auto created = cluster_->createNamespace();
  ASSERT_TRUE(created.isOk()) << created.status();
  namespace_ = *created;
}

void ClusterTest::TearDown() {
  if (!cluster_) return;
  cluster_->clearFaults();
  if (!namespace_.empty()) cluster_->deleteNamespace(namespace_);
}

void TestCluster::forgetHistory() {
  if (double_) double_->compact();
}

void TestCluster::dropWatches() {
  if (double_) double_->dropWatches();
}

}  // namespace granary::testing
