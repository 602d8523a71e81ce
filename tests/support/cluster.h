// The cluster the Kubernetes contract tests run against: the in-process API-server double, or
// a real cluster when GRANARY_TEST_KUBECONFIG names a kubeconfig (like envtest's
// USE_EXISTING_CLUSTER). Either way the CRDs of crds/ are installed once per process, and
// every test works in a namespace of its own, deleted afterwards.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "common/kube/client.h"
#include "tests/support/api_server_double.h"
#include "tests/support/eventually.h"

namespace granary::testing {

class TestCluster {
 public:
  // The process's cluster, started on first use; null (with a test failure recorded) when
  // it cannot be reached or prepared.
  static TestCluster* shared();

  // A new namespace with a unique name, and its removal.
  Result<std::string> createNamespace();
  void deleteNamespace(const std::string& name);
  // Undoes fault injection (double only).
  void clearFaults();

  kube::Client& client() { return *client_; }
  kube::RestConfig restConfig() const { return config_; }

  // The double, for fault injection; null on a real cluster.
  ApiServerDouble* apiServerDouble() { return double_.get(); }
  bool isDouble() const { return double_ != nullptr; }

  // Makes watches from earlier resourceVersions fail with 410 Gone. The double forgets its
  // history; a real cluster compacts on its own, so tests there use resourceVersion "1".
  void forgetHistory();
  // Breaks every open watch (double only; a no-op on a real cluster, where short
  // timeoutSeconds end the streams instead).
  void dropWatches();

 private:
  TestCluster() = default;
  std::unique_ptr<ApiServerDouble> double_;
  kube::RestConfig config_;
  std::unique_ptr<kube::Client> client_;
};

// A test with the shared cluster and a fresh namespace.
class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  kube::Client& client() { return cluster_->client(); }
  const std::string& ns() const { return namespace_; }

  TestCluster* cluster_ = nullptr;
  std::string namespace_;
};

// Runs `body` on a thread with a stop token; stops and joins it when destroyed, so a failed
// assertion never leaves a thread running.
class Running {
 public:
  explicit Running(std::function<void(std::stop_token)> body)
      : thread_([this, body = std::move(body)] { body(stop_.get_token()); }) {}
  ~Running() { stop(); }
  void stop() {
    stop_.request_stop();
    if (thread_.joinable()) thread_.join();
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::stop_source stop_;
  std::thread thread_;
};

// A Node that a test stands in for, as a hollow kubelet does: created with `statusYaml` (its
// allocatable, say) and kept Ready until destroyed (then deleted): its Lease in kube-node-lease
// and its Ready condition renewed every `period`. The not-ready and unreachable taints that the
// server gives a node without a kubelet are taken off once it reports Ready, as the node
// lifecycle controller does (a cluster without a controller manager has none to do it). The
// constructor returns once the node is Ready and untainted; ok() says whether it got there.
class TestNode {
 public:
  TestNode(kube::Client& client, std::string name, const std::string& statusYaml = "",
           std::chrono::milliseconds period = std::chrono::seconds(10));
  ~TestNode();
  TestNode(const TestNode&) = delete;
  TestNode& operator=(const TestNode&) = delete;

  const std::string& name() const { return name_; }
  const Status& status() const { return status_; }
  // One heartbeat now.
  Status beat();
  // The node's kubelet gone: no more heartbeats, and the Ready condition Unknown since `since`,
  // as the node lifecycle controller marks a node whose Lease lapsed.
  Status lose(std::chrono::system_clock::time_point since);

 private:
  kube::Client& client_;
  const std::string name_;
  kube::Json statusPatch_;
  Status status_;
  std::unique_ptr<Running> heart_;
};

// Changes an object as `kubectl edit` does: reads it, applies `change`, writes it back, and
// starts over when the write meets a Conflict (a controller's status write moves the
// resourceVersion too). The write's result, after at most 10 attempts.
Result<kube::Json> edit(kube::Client& client, const kube::ResourceType& type, const std::string& ns,
                        const std::string& name, const std::function<void(kube::Json&)>& change);

// Writes a kubeconfig that reaches `config`'s server as `config` does, with `ns` as the
// context's namespace (what a process in a pod of that namespace would see in-cluster).
Status writeKubeconfig(const kube::RestConfig& config, const std::string& ns,
                       const std::filesystem::path& path);

// Builds a JSON object from a YAML text (test manifests read better as YAML).
kube::Json yaml(const std::string& text);

}  // namespace granary::testing
