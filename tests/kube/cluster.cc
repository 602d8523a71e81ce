#include "tests/kube/cluster.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
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
