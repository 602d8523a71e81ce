#include "tests/support/cluster.h"

#include <cpprest/asyncrt_utils.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

#include "common/clock.h"
#include "common/kube/yaml_json.h"

namespace granary::testing {

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

TestNode::TestNode(kube::Client& client, std::string name, const std::string& statusYaml,
                   std::chrono::milliseconds period)
    : client_(client),
      name_(std::move(name)),
      statusPatch_(statusYaml.empty() ? kube::Json::object() : yaml(statusYaml)) {
  auto created =
      client_.create(kube::resources::nodes(), "", yaml("metadata: {name: " + name_ + "}"));
  status_ = created.status();
  if (!status_.isOk()) return;
  status_ = beat();
  if (!status_.isOk()) return;
  heart_ = std::make_unique<Running>([this, period](std::stop_token stop) {
    while (realClock().sleepFor(period, stop)) (void)beat();
  });
}

TestNode::~TestNode() {
  heart_.reset();
  (void)client_.remove(kube::resources::nodes(), "", name_);
  (void)client_.remove(kube::resources::leases(), "kube-node-lease", name_);
}

Status TestNode::lose(std::chrono::system_clock::time_point since) {
  heart_.reset();
  kube::Json unknown = yaml(
      "{type: Ready, status: Unknown, reason: NodeStatusUnknown, message: Kubelet stopped "
      "posting node status.}");
  unknown["lastHeartbeatTime"] = kube::Json::string(kube::metav1Time(since));
  unknown["lastTransitionTime"] = kube::Json::string(kube::metav1Time(since));
  kube::Json patch = kube::Json::object();
  patch["status"]["conditions"] = kube::Json::array();
  patch["status"]["conditions"][0] = std::move(unknown);
  return client_.mergePatch(kube::resources::nodes(), "", name_, patch, "status").status();
}

Status TestNode::beat() {
  const std::string now = kube::metav1Time(std::chrono::system_clock::now());
  // The kubelet's Lease: its renewals are the heartbeat the node lifecycle controller watches.
  kube::Json lease =
      yaml("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: " + name_ +
           "}\nspec: {holderIdentity: " + name_ + ", leaseDurationSeconds: 40}");
  lease["spec"]["renewTime"] =
      kube::Json::string(kube::metav1MicroTime(std::chrono::system_clock::now()));
  auto renewed = client_.apply(kube::resources::leases(), "kube-node-lease", name_, lease);
  if (!renewed.isOk()) return renewed.status();
  // The kubelet's status: Ready, with the test's figures.
  kube::Json patch = kube::Json::object();
  patch["status"] =
      statusPatch_.has_object_field("status") ? statusPatch_.at("status") : kube::Json::object();
  kube::Json ready = yaml(
      "{type: Ready, status: \"True\", reason: KubeletReady, message: kubelet is posting ready "
      "status}");
  ready["lastHeartbeatTime"] = kube::Json::string(now);
  ready["lastTransitionTime"] = kube::Json::string(now);
  patch["status"]["conditions"] = kube::Json::array();
  patch["status"]["conditions"][0] = ready;
  auto written = client_.mergePatch(kube::resources::nodes(), "", name_, patch, "status");
  if (!written.isOk()) return written.status();
  // The node lifecycle controller's part: a Ready node loses the taints of an absent kubelet.
  const auto absentKubelet = [](const kube::Json& taint) {
    const std::string key = taint.has_string_field("key") ? taint.at("key").as_string() : "";
    return key == "node.kubernetes.io/not-ready" || key == "node.kubernetes.io/unreachable";
  };
  const kube::Json taints = kube::pathValue(*written, "spec.taints");
  bool tainted = false;
  if (taints.is_array())
    for (const auto& taint : taints.as_array()) tainted = tainted || absentKubelet(taint);
  if (!tainted) return Status::ok();
  return edit(client_, kube::resources::nodes(), "", name_,
              [&](kube::Json& node) {
                kube::Json kept = kube::Json::array();
                const kube::Json all = kube::pathValue(node, "spec.taints");
                if (all.is_array())
                  for (const auto& taint : all.as_array())
                    if (!absentKubelet(taint)) kept[kept.size()] = taint;
                node["spec"]["taints"] = kept;
              })
      .status();
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
      // Strict, as `kubectl apply` asks: a key the API does not know fails the install.
      auto created = client.create(kube::resources::customResourceDefinitions(), "",
                                   kube::toJson(document), {.fieldValidation = "Strict"});
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
  // Pods need the namespace's default ServiceAccount, which a controller makes a moment later.
  const kube::ResourceType accounts{"", "v1", "serviceaccounts", "ServiceAccount", true};
  if (!eventually([&] { return client_->get(accounts, name, "default").isOk(); },
                  std::chrono::seconds(60)))
    return unavailable("namespace " + name + " got no default ServiceAccount");
  return name;
}

void TestCluster::deleteNamespace(const std::string& name) {
  (void)client_->remove(kube::resources::namespaces(), "", name);
  // What waits on finalizers that no controller will remove any more (the test's operator is
  // stopped) is let go, and the namespace is waited for, so that nothing of this test lingers
  // for the next one's controllers to act on.
  const bool gone = eventually(
      [&] {
        for (const auto* type : {&kube::resources::datasets(), &kube::resources::trainingJobs(),
                                 &kube::resources::pods()}) {
          auto left = client_->list(*type, name);
          if (!left.isOk()) continue;
          for (const auto& object : left->items) {
            if (!kube::pathValue(object, "metadata.finalizers").is_array()) continue;
            (void)client_->mergePatch(*type, name, kube::nameOf(object),
                                      yaml("metadata: {finalizers: null}"));
          }
        }
        return client_->get(kube::resources::namespaces(), "", name).status().code() ==
               StatusCode::kNotFound;
      },
      std::chrono::seconds(120));
  EXPECT_TRUE(gone) << "namespace " << name << " is still there 2 minutes after its deletion";
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
