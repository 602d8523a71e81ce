// The Dataset controller against the API-server double (or a real cluster through
// GRANARY_TEST_KUBECONFIG) with real granary-cache-node processes and a real web origin on
// loopback. The test plays the kubelet: it creates the Nodes and the cache-node pods and sets
// their status.
#include "operator/dataset_controller.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "common/kube/manager.h"
#include "common/names.h"
#include "csi/v1/csi.grpc.pb.h"
#include "operator/core/conditions.h"
#include "operator/training_job_controller.h"
#include "tests/support/cache_node_process.h"
#include "tests/support/cluster.h"
#include "tests/support/http_file_server.h"
#include "tests/support/rbac_check.h"
#include "tests/support/scratch_tree.h"

namespace granary::testing {
namespace {

using kube::Json;
namespace resources = kube::resources;
using namespace std::chrono_literals;

class DatasetControllerTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    if (HasFatalFailure()) return;
    suffix_ = ns().substr(ns().rfind('-') + 1);
    root_ = std::filesystem::temp_directory_path() / ("granary-operator-" + ns());
    removeTree(root_);
    std::mt19937 random(11);
    for (int i = 0; i < 12; ++i) {
      std::string data(3000 + 1777 * i, '\0');
      for (auto& c : data) c = static_cast<char>(random());
      const auto path = root_ / "origin" / "train" / ("part-" + std::to_string(i) + ".bin");
      std::filesystem::create_directories(path.parent_path());
      std::ofstream(path, std::ios::binary) << data;
      totalBytes_ += static_cast<int64_t>(data.size());
    }
    auto server = HttpFileServer::start(root_ / "origin");
    ASSERT_TRUE(server.isOk()) << server.status();
    origin_ = std::move(*server);
  }
  void TearDown() override {
    running_.reset();
    jobs_.reset();
    manager_.reset();
    operatorClient_.reset();
    EXPECT_EQ(rbac_.notGranted(), std::vector<std::string>{})
        << "the chart must grant granary-operator every request it made";
    for (auto& [name, process] : processes_) process->kill(SIGTERM);  // unmounts its datasets
    processes_.clear();
    for (const auto& other : otherNamespaces_) cluster_->deleteNamespace(other);
    nodes_.clear();
    origin_.reset();
    removeTree(root_);  // and the mounts a killed node left
    ClusterTest::TearDown();
  }

  // A Kubernetes node with a granary-cache-node on it (a real process, a pod object); `options`
  // (YAML lines) are added to the node's options file.
  NodeProcess& cacheNode(const std::string& name, const std::string& options = "") {
    const std::string full = name + "-" + suffix_;
    nodes_.push_back(std::make_unique<TestNode>(client(), full));
    EXPECT_TRUE(nodes_.back()->status().isOk()) << nodes_.back()->status();
    processes_[full] = std::make_unique<NodeProcess>(root_ / full, full);
    NodeProcess& process = *processes_[full];
    if (!options.empty()) std::ofstream(root_ / full / "config.yaml", std::ios::app) << options;
    process.start();
    const std::string port = process.address().substr(process.address().rfind(':') + 1);
    auto pod = client().create(
        resources::pods(), ns(),
        yaml("metadata: {name: agent-" + full + ", labels: {" + agentSelector() +
             "}}\nspec: {nodeName: " + full +
             ", containers: [{name: agent, image: granary, ports: [{name: grpc, containerPort: " +
             port + "}]}]}"));
    EXPECT_TRUE(pod.isOk()) << pod.status();
    EXPECT_TRUE(client()
                    .mergePatch(resources::pods(), ns(), "agent-" + full,
                                yaml("status: {podIP: 127.0.0.1, conditions: [{type: Ready, "
                                     "status: \"True\"}]}"),
                                "status")
                    .isOk());
    return process;
  }
  std::string agentSelector() const {
    return "app.kubernetes.io/name: granary-cache-node, granary.io/test: t" + suffix_;
  }

  // The Dataset controller; with `trainingJobs`, the TrainingJob controller too, sampling the
  // cache nodes' telemetry every 300 ms.
  void startOperator(op::DatasetControllerOptions options = {}, bool trainingJobs = false) {
    options.pollWarming = 200ms;
    options.pollReady = 500ms;
    // The operator's own client: its writes counted, its requests checked against RBAC.
    auto operatorClient = kube::Client::create(
        cluster_->restConfig(),
        {.onResponse = [this, record = rbac_.recorder()](const std::string& method,
                                                         const std::string& path, int code) {
          if (method != "GET") {
            std::lock_guard lock(writesMutex_);
            ++operatorWrites_;
            lastWrite_ = method + " " + path;
          }
          record(method, path, code);
        }});
    ASSERT_TRUE(operatorClient.isOk()) << operatorClient.status();
    operatorClient_ = std::move(*operatorClient);
    auto manager = kube::Manager::create(*operatorClient_, {.metricsAddress = ""}, registry_);
    ASSERT_TRUE(manager.isOk()) << manager.status();
    manager_ = std::move(*manager);
    std::string selector = agentSelector();
    selector.replace(selector.find(": "), 2, "=");
    selector.replace(selector.find(": "), 2, "=");
    selector.erase(selector.find(' '), 1);
    controller_ = std::make_unique<op::DatasetController>(*manager_, nodesApi_, selector, options);
    if (trainingJobs) {
      auto series = op::declareJobSeries(registry_);
      ASSERT_TRUE(series.isOk()) << series.status();
      jobs_ = std::make_unique<op::TrainingJobController>(
          *manager_, op::TrainingJobControllerOptions{.cacheNodes = &nodesApi_,
                                                      .cacheNodeSelector = selector,
                                                      .telemetryInterval = 300ms,
                                                      .series = *series});
    }
    running_ =
        std::make_unique<Running>([this](std::stop_token stop) { (void)manager_->run(stop); });
  }

  // `extra` goes into spec.source, `cacheExtra` into spec.cache.
  void createDataset(const std::string& extra = "", const std::string& name = "coco",
                     const std::string& cacheExtra = "") {
    auto created = client().create(
        resources::datasets(), ns(),
        yaml("apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: " + name +
             "}\nspec:\n  source: {uri: \"" + origin_->url() + "\"" + extra +
             "}\n  cache: {chunkSize: 1Mi" + cacheExtra + "}\n"));
    ASSERT_TRUE(created.isOk()) << created.status();
  }

  Json dataset(const std::string& name = "coco") {
    auto got = client().get(resources::datasets(), ns(), name);
    return got.isOk() ? *got : Json();
  }
  std::string phase(const std::string& name = "coco") {
    const Json p = kube::pathValue(dataset(name), "status.phase");
    return p.is_string() ? p.as_string() : "";
  }
  bool waitPhase(const std::string& wanted, std::chrono::milliseconds limit = 30s) {
    return eventually([&] { return phase() == wanted; }, limit);
  }
  // Events in the test's namespace as "Type/Reason: message".
  std::vector<std::string> events() {
    std::vector<std::string> out;
    auto listed = client().list(resources::events(), ns());
    if (!listed.isOk()) return out;
    for (const auto& e : listed->items) {
      out.push_back(e.at("type").as_string() + "/" + e.at("reason").as_string() + ": " +
                    e.at("message").as_string());
    }
    return out;
  }
  // Events are written after the status they explain, so an observer of the status waits; one
  // that follows a process's restart waits as long as the restart may take on a busy machine.
  bool hasEvent(const std::string& typeAndReason, std::chrono::milliseconds limit = 10s) {
    return eventually(
        [&] {
          for (const auto& e : events())
            if (e.starts_with(typeAndReason + ":")) return true;
          return false;
        },
        limit);
  }
  // TrainingJob bert: one worker reading coco at /data, gang restarts up to `backoffLimit`.
  void createJob(int backoffLimit) {
    ASSERT_TRUE(client()
                    .create(resources::trainingJobs(), ns(),
                            yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: "
                                 "{name: bert}\nspec:\n  datasets: [{name: coco, mountPath: "
                                 "/data}]\n  runPolicy: {backoffLimit: " +
                                 std::to_string(backoffLimit) +
                                 "}\n  template: {spec: {containers: [{name: trainer, image: "
                                 "pytorch}]}}"))
                    .isOk());
  }
  // Job bert's worker 0 once the operator created it (null after 20 s without).
  Json createdWorker() {
    Json worker;
    eventually(
        [&] {
          auto got = client().get(resources::pods(), ns(), "bert-worker-0");
          if (got.isOk()) worker = *got;
          return got.isOk();
        },
        20s);
    return worker;
  }
  // The scheduler's and the kubelet's part: bind bert's worker 0 to `node` (pods/binding, as on
  // a real cluster), then report it running.
  bool runOn(const std::string& node) {
    auto worker = client().get(resources::pods(), ns(), "bert-worker-0");
    return worker.isOk() &&
           client().bindPod(ns(), "bert-worker-0", kube::uidOf(*worker), node).isOk() &&
           client()
               .mergePatch(resources::pods(), ns(), "bert-worker-0",
                           yaml("status: {phase: Running, conditions: [{type: Ready, status: "
                                "\"True\"}]}"),
                           "status")
               .isOk();
  }
  // Dataset generations a node holds.
  std::vector<int64_t> heldGenerations(NodeProcess& node) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kToken);
    v1::ListDatasetsResponse response;
    std::vector<int64_t> out;
    if (!node.api().ListDatasets(&context, {}, &response).ok()) return {-1};
    for (const auto& d : response.datasets())
      if (d.dataset().namespace_() == ns()) out.push_back(d.dataset().generation());
    return out;
  }
  op::Condition readyCondition() {
    return op::conditionOf(kube::pathValue(dataset(), "status"), "Ready");
  }
  int64_t statusInt(const std::string& field) {
    const Json v = kube::pathValue(dataset(), "status." + field);
    return v.is_integer() ? v.as_number().to_int64() : -1;
  }

  // A second namespace, deleted with the test's.
  std::string otherNamespace() {
    auto created = cluster_->createNamespace();
    EXPECT_TRUE(created.isOk()) << created.status();
    if (!created.isOk()) return "";
    otherNamespaces_.push_back(*created);
    return *created;
  }
  // A Dataset in `ns` whose source is `uri` (dataset://...), with `extra` in its spec.
  Status createReference(const std::string& ns, const std::string& name, const std::string& uri,
                         const std::string& extra = "") {
    return client()
        .create(resources::datasets(), ns,
                yaml("apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: " + name +
                     "}\nspec:\n  source: {uri: \"" + uri + "\"}\n" + extra))
        .status();
  }
  // Dataset coco, offered to namespace `team` (spec.sharing), once Ready.
  void offerDataset(const std::string& team) {
    createDataset("", "coco", "}\n  sharing: {namespaces: [" + team + "]");
    ASSERT_TRUE(waitPhase("Ready")) << dataset().serialize();
  }
  Json datasetIn(const std::string& ns, const std::string& name) {
    auto got = client().get(resources::datasets(), ns, name);
    return got.isOk() ? *got : Json();
  }
  std::string phaseIn(const std::string& ns, const std::string& name) {
    const Json p = kube::pathValue(datasetIn(ns, name), "status.phase");
    return p.is_string() ? p.as_string() : "";
  }
  op::Condition readyIn(const std::string& ns, const std::string& name) {
    return op::conditionOf(kube::pathValue(datasetIn(ns, name), "status"), "Ready");
  }
  std::vector<std::string> referredBy(const std::string& name = "coco") {
    std::vector<std::string> out;
    const Json list = kube::pathValue(dataset(name), "status.referredBy");
    if (list.is_array())
      for (const auto& r : list.as_array()) out.push_back(r.as_string());
    return out;
  }
  // The kubelet's NodePublishVolume of Dataset `name` for a pod of `podNs` (uid `uid`), at
  // root_/kubelet/<uid>/data.
  grpc::Status publishVolume(NodeProcess& node, const std::string& podNs, const std::string& name,
                             const std::string& uid) {
    auto channel = grpc::CreateChannel(node.csiAddress(), grpc::InsecureChannelCredentials());
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + 10s))
      return {grpc::StatusCode::UNAVAILABLE, "no CSI socket"};
    csi::v1::NodePublishVolumeRequest publish;
    publish.set_volume_id("csi-" + uid);
    publish.set_target_path((root_ / "kubelet" / uid / "data").string());
    publish.set_readonly(true);
    publish.mutable_volume_capability()->mutable_mount();
    publish.mutable_volume_context()->insert({{"dataset", name},
                                              {"csi.storage.k8s.io/ephemeral", "true"},
                                              {"csi.storage.k8s.io/pod.namespace", podNs},
                                              {"csi.storage.k8s.io/pod.name", "reader-" + uid},
                                              {"csi.storage.k8s.io/pod.uid", uid}});
    grpc::ClientContext context;
    csi::v1::NodePublishVolumeResponse response;
    return csi::v1::Node::NewStub(channel)->NodePublishVolume(&context, publish, &response);
  }
  void unpublishVolume(NodeProcess& node, const std::string& uid) {
    auto channel = grpc::CreateChannel(node.csiAddress(), grpc::InsecureChannelCredentials());
    csi::v1::NodeUnpublishVolumeRequest unpublish;
    unpublish.set_volume_id("csi-" + uid);
    unpublish.set_target_path((root_ / "kubelet" / uid / "data").string());
    grpc::ClientContext context;
    csi::v1::NodeUnpublishVolumeResponse response;
    EXPECT_TRUE(
        csi::v1::Node::NewStub(channel)->NodeUnpublishVolume(&context, unpublish, &response).ok());
  }
  // Every file under the volume of pod `uid`, compared byte for byte with the origin's files
  // under `originDirectory`; the number of files that matched.
  int filesMatchingOrigin(const std::string& uid, const std::filesystem::path& originDirectory) {
    const auto volume = root_ / "kubelet" / uid / "data";
    int matched = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(originDirectory)) {
      if (!entry.is_regular_file()) continue;
      const auto relative = std::filesystem::relative(entry.path(), originDirectory);
      const auto slurp = [](const std::filesystem::path& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
      };
      const std::string want = slurp(entry.path());
      EXPECT_EQ(slurp(volume / relative), want) << relative;
      if (slurp(volume / relative) == want) ++matched;
    }
    return matched;
  }

  // The origin's files as they are now, copied to `copy`: what a reader of this version reads.
  void snapshotOrigin(const std::filesystem::path& copy) {
    std::filesystem::remove_all(copy);
    std::filesystem::copy(root_ / "origin", copy, std::filesystem::copy_options::recursive);
  }
  // The origin changes: one file rewritten (longer), one added, one removed.
  void changeOrigin() {
    std::ofstream(root_ / "origin" / "train" / "part-0.bin", std::ios::binary | std::ios::trunc)
        << std::string(5000, 'x');
    std::ofstream(root_ / "origin" / "train" / "part-new.bin", std::ios::binary) << "new file";
    std::filesystem::remove(root_ / "origin" / "train" / "part-11.bin");
  }
  // A new value of the granary.io/refresh-requested annotation.
  void requestRefresh(const std::string& value, const std::string& name = "coco") {
    ASSERT_TRUE(edit(client(), resources::datasets(), ns(), name, [&](Json& dataset) {
                  dataset["metadata"]["annotations"][names::kRefreshRequestedAnnotation] =
                      Json::string(value);
                }).isOk());
  }
  std::string statusString(const std::string& field) {
    const Json v = kube::pathValue(dataset(), "status." + field);
    return v.is_string() ? v.as_string() : "";
  }
  // The Dataset's status once the operator has caught up with the nodes (the same for a second).
  Json settledStatus() {
    Json seen;
    EXPECT_TRUE(eventually(
        [&] {
          seen = kube::pathValue(dataset(), "status");
          std::this_thread::sleep_for(1s);
          return kube::sameJson(seen, kube::pathValue(dataset(), "status"));
        },
        20s));
    return seen;
  }
  std::set<int64_t> heldVersions(NodeProcess& node) {
    const auto held = heldGenerations(node);
    return {held.begin(), held.end()};
  }

  std::vector<std::string> otherNamespaces_;
  std::string suffix_;
  std::filesystem::path root_;
  std::unique_ptr<HttpFileServer> origin_;
  int64_t totalBytes_ = 0;
  std::vector<std::unique_ptr<TestNode>> nodes_;
  std::map<std::string, std::unique_ptr<NodeProcess>> processes_;
  op::CacheNodeClient nodesApi_{{.token = Secret(kToken)}};
  std::atomic<int64_t> operatorWrites_{0};  // POST, PUT, PATCH and DELETE requests
  std::mutex writesMutex_;
  std::string lastWrite_;  // the latest of them
  RbacCheck rbac_{"granary-operator"};
  std::unique_ptr<kube::Client> operatorClient_;
  MetricsRegistry registry_;
  std::unique_ptr<kube::Manager> manager_;
  std::unique_ptr<op::DatasetController> controller_;
  std::unique_ptr<op::TrainingJobController> jobs_;
  std::unique_ptr<Running> running_;
};

TEST_F(DatasetControllerTest, CachesOnEveryNodeReportsProgressAndPurgesOnDeletion) {
  NodeProcess& a = cacheNode("a");
  NodeProcess& b = cacheNode("b");
  startOperator();
  createDataset();
  ASSERT_TRUE(waitPhase("Ready")) << dataset().serialize();
  const Json status = dataset().at("status");
  EXPECT_EQ(statusInt("totalBytes"), totalBytes_);
  EXPECT_EQ(statusInt("totalFiles"), 12);
  EXPECT_EQ(statusInt("cachedBytes"), totalBytes_);
  EXPECT_EQ(status.at("cachedPercentage").as_string(), "100.0%");
  EXPECT_EQ(statusInt("observedGeneration"), 1);
  ASSERT_EQ(status.at("nodes").size(), 2u);
  int64_t onNodes = 0;
  for (const auto& n : status.at("nodes").as_array()) {
    EXPECT_TRUE(n.at("ready").as_bool());
    onNodes += n.at("cachedBytes").as_number().to_int64();
  }
  EXPECT_EQ(onNodes, totalBytes_) << "one copy of every byte, spread over the nodes";
  EXPECT_GE(statusInt("originBytesRead"), 0);
  const op::Condition ready = op::conditionOf(status, "Ready");
  EXPECT_TRUE(ready.status);
  EXPECT_EQ(ready.reason, "Cached");
  EXPECT_TRUE(hasEvent("Normal/Cached")) << ::testing::PrintToString(events());
  const auto finalizers = kube::pathValue(dataset(), "metadata.finalizers");
  ASSERT_TRUE(finalizers.is_array());
  EXPECT_EQ(finalizers.at(0).as_string(), names::kDatasetFinalizer);

  // At steady state nothing is written: no request, and so the resourceVersion stays. A window
  // of 1.5 s (three Ready polls) without a write comes soon (a poll that saw the cache before
  // it held the Ready write may still write once); an operator that rewrote an unchanged
  // status on every poll never has one.
  const bool quiet = eventually(
      [&] {
        const std::string version = kube::resourceVersionOf(dataset());
        const int64_t writes = operatorWrites_;
        std::this_thread::sleep_for(1500ms);
        return operatorWrites_ == writes && kube::resourceVersionOf(dataset()) == version;
      },
      20s);
  EXPECT_TRUE(quiet) << "no write while nothing changed";

  ASSERT_TRUE(client().remove(resources::datasets(), ns(), "coco").isOk());
  ASSERT_TRUE(eventually([&] { return dataset().is_null(); }, 20s));
  EXPECT_TRUE(heldGenerations(a).empty());
  EXPECT_TRUE(heldGenerations(b).empty());
}

TEST_F(DatasetControllerTest, AMissingSecretIsAConditionAndAnEventUntilItExists) {
  NodeProcess& node = cacheNode("a");
  startOperator();
  createDataset(", secretRef: {name: origin-token}");
  ASSERT_TRUE(eventually([&] { return readyCondition().reason == "SecretNotFound"; }, 20s))
      << dataset().serialize();
  EXPECT_EQ(phase(), "Pending");
  EXPECT_NE(readyCondition().message.find("origin-token"), std::string::npos);
  EXPECT_TRUE(hasEvent("Warning/SecretNotFound"));
  const std::string secretValue = "tok-9f8e7d6c5b4a";
  ASSERT_TRUE(
      client()
          .create(resources::secrets(), ns(),
                  yaml("metadata: {name: origin-token}\nstringData: {token: " + secretValue +
                       "}\ndata: {token: " +
                       utility::conversions::to_utf8string(utility::conversions::to_base64(
                           std::vector<unsigned char>(secretValue.begin(), secretValue.end()))) +
                       "}"))
          .isOk());
  ASSERT_TRUE(waitPhase("Ready")) << dataset().serialize();
  // The credential reached the node, and nothing the operator wrote carries it.
  EXPECT_EQ(dataset().serialize().find(secretValue), std::string::npos);
  for (const auto& e : events()) EXPECT_EQ(e.find(secretValue), std::string::npos) << e;
  EXPECT_EQ(node.log().find(secretValue), std::string::npos);
}

TEST_F(DatasetControllerTest, ANodeThatGoesIsReplannedAndTheDatasetHeals) {
  cacheNode("a");
  cacheNode("b");
  startOperator();
  createDataset();
  ASSERT_TRUE(waitPhase("Ready"));
  // Node b goes: its agent pod disappears and its process dies.
  const std::string b = "b-" + suffix_;
  processes_.at(b)->kill(SIGKILL);
  ASSERT_TRUE(client().remove(resources::pods(), ns(), "agent-" + b).isOk());
  ASSERT_TRUE(eventually(
      [&] {
        const Json s = dataset().at("status");
        return s.at("nodes").size() == 1 && s.at("phase").as_string() == "Ready";
      },
      30s))
      << dataset().serialize();
  EXPECT_EQ(statusInt("cachedBytes"), totalBytes_);
  EXPECT_EQ(dataset().at("status").at("nodes").at(0).at("cachedBytes").as_number().to_int64(),
            totalBytes_)
      << "the remaining node holds everything";
  EXPECT_TRUE(eventually(
      [&] {
        for (const auto& e : events())
          if (e.starts_with("Warning/NodeLost:") || e.starts_with("Warning/NodeUnreachable:"))
            return true;
        return false;
      },
      10s))
      << ::testing::PrintToString(events());
}

TEST_F(DatasetControllerTest, DeletionDoesNotHangOnADeadNode) {
  NodeProcess& a = cacheNode("a");
  cacheNode("b");
  startOperator({.purgeTimeout = 2s});
  createDataset();
  ASSERT_TRUE(waitPhase("Ready"));
  processes_.at("b-" + suffix_)->kill(SIGKILL);  // its pod stays: the node looks alive
  ASSERT_TRUE(client().remove(resources::datasets(), ns(), "coco").isOk());
  ASSERT_TRUE(eventually([&] { return dataset().is_null(); }, 20s));
  EXPECT_TRUE(hasEvent("Warning/PurgeIncomplete")) << ::testing::PrintToString(events());
  EXPECT_TRUE(heldGenerations(a).empty());
}

TEST_F(DatasetControllerTest, ASpecChangeCachesTheNewGenerationAndDropsTheOld) {
  NodeProcess& a = cacheNode("a");
  startOperator();
  createDataset();
  ASSERT_TRUE(waitPhase("Ready"));
  ASSERT_TRUE(edit(client(), resources::datasets(), ns(), "coco", [](Json& dataset) {
                dataset["spec"]["cache"]["chunkSize"] = Json::string("2Mi");
              }).isOk());
  ASSERT_TRUE(
      eventually([&] { return statusInt("observedGeneration") == 2 && phase() == "Ready"; }, 30s))
      << dataset().serialize();
  EXPECT_EQ(heldGenerations(a), std::vector<int64_t>{2});
}

TEST_F(DatasetControllerTest, ABadSpecFailsWithTheFieldNamed) {
  cacheNode("a");
  startOperator();
  // Accepted by the API server, refused by the origin factory: an option it does not know.
  createDataset(", options: {addressing: sideways}");
  ASSERT_TRUE(waitPhase("Failed")) << dataset().serialize();
  const op::Condition ready = readyCondition();
  EXPECT_EQ(ready.reason, "InvalidSpec");
  EXPECT_NE(ready.message.find("spec.source.options.addressing"), std::string::npos)
      << "the Dataset's own field, not the node request's: " << ready.message;
  EXPECT_TRUE(hasEvent("Warning/InvalidSpec"));
}

// A file:// source in another namespace's directory of a root of namespaces: the node refuses it
// (PERMISSION_DENIED) and the Dataset fails with InvalidSpec naming spec.source.uri, the root, the
// namespace and the setting, as a source outside every root does.
TEST_F(DatasetControllerTest, AFileSourceInAnotherNamespacesDirectoryFailsWithInvalidSpec) {
  const auto teams = root_ / "teams";
  std::filesystem::create_directories(teams / "team-a" / "coco");
  cacheNode("a", "fileOriginRoots: [\"" + (teams / "{namespace}").string() + "\"]\n");
  startOperator();
  const std::string uri = "file://" + (teams / "team-a" / "coco").string() + "/";
  ASSERT_TRUE(client()
                  .create(resources::datasets(), ns(),
                          yaml("apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: "
                               "coco}\nspec:\n  source: {uri: \"" +
                               uri + "\"}\n"))
                  .isOk());
  ASSERT_TRUE(waitPhase("Failed")) << dataset().serialize();
  const op::Condition ready = readyCondition();
  EXPECT_EQ(ready.reason, "InvalidSpec");
  for (const std::string& said : std::vector<std::string>{
           "spec.source.uri: " + uri + " is refused for namespace " + ns(),
           (teams / "{namespace}").string(), (teams / ns()).string() + "/",
           "cacheNode.fileOriginRoots"})
    EXPECT_NE(ready.message.find(said), std::string::npos) << said << " in " << ready.message;
  EXPECT_TRUE(hasEvent("Warning/InvalidSpec"));
}

// warm: Never: the nodes serve the dataset and cache only what is read. The status says so —
// nothing cached, not Ready, and the setting that would warm it — and changing that setting
// warms it.
TEST_F(DatasetControllerTest, WarmNeverIsOnDemandWithNothingCachedUntilTheSettingChanges) {
  cacheNode("a");
  cacheNode("b");
  startOperator();
  createDataset("", "coco", ", warm: Never");
  ASSERT_TRUE(eventually(
      [&] { return phase() == "OnDemand" && statusInt("totalBytes") == totalBytes_; }, 30s))
      << dataset().serialize();
  EXPECT_EQ(statusInt("cachedBytes"), 0);
  EXPECT_EQ(statusInt("cachedFiles"), 0);
  EXPECT_EQ(dataset().at("status").at("cachedPercentage").as_string(), "0.0%");
  const op::Condition ready = readyCondition();
  EXPECT_FALSE(ready.status);
  EXPECT_EQ(ready.reason, "NotWarmedByPolicy");
  EXPECT_NE(ready.message.find("warm: OnCreate"), std::string::npos) << ready.message;
  EXPECT_TRUE(hasEvent("Normal/NotWarmedByPolicy")) << ::testing::PrintToString(events());
  const Json nodes = dataset().at("status").at("nodes");
  ASSERT_EQ(nodes.size(), 2u);
  for (const auto& n : nodes.as_array()) EXPECT_FALSE(n.at("ready").as_bool());

  ASSERT_TRUE(edit(client(), resources::datasets(), ns(), "coco", [](Json& dataset) {
                dataset["spec"]["cache"]["warm"] = Json::string("OnCreate");
              }).isOk());
  ASSERT_TRUE(waitPhase("Ready")) << dataset().serialize();
  EXPECT_EQ(statusInt("cachedBytes"), totalBytes_);
}

// Runs `command` (sh -c) in a child process placed in a cgroup named like a kubelet's cgroup
// of the pod `uid` (".../pod<uid>"), as a container of that pod runs. The exit status, or -1
// when no cgroup hierarchy can be written here.
int runInPodCgroup(const std::string& uid, const std::string& command) {
  std::ifstream mounts("/proc/self/mounts");
  std::vector<std::filesystem::path> hierarchies;
  for (std::string device, point, type, rest; mounts >> device >> point >> type;) {
    std::getline(mounts, rest);
    if (type == "cgroup2" || (type == "cgroup" && rest.find("pids") != std::string::npos))
      hierarchies.emplace_back(point);
  }
  for (const auto& hierarchy : hierarchies) {
    const auto cgroup = hierarchy / "granary-test" / ("pod" + uid);
    std::error_code error;
    std::filesystem::create_directories(cgroup, error);
    if (error) continue;
    int release[2];
    if (::pipe(release) != 0) return -1;
    const pid_t child = ::fork();
    if (child == 0) {
      char go = 0;
      ::close(release[1]);
      if (::read(release[0], &go, 1) != 1 || go != 'y') ::_exit(126);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(release[0]);
    const bool moved =
        static_cast<bool>(std::ofstream(cgroup / "cgroup.procs") << child << std::endl);
    const char go = moved ? 'y' : 'n';
    (void)!::write(release[1], &go, 1);
    ::close(release[1]);
    int status = 0;
    ::waitpid(child, &status, 0);
    std::filesystem::remove(cgroup, error);
    std::filesystem::remove(cgroup.parent_path(), error);
    if (moved) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }
  return -1;
}

// A BeforeStart job creates no worker until its datasets are Ready; while it waits it is the
// reader of its OnJob dataset, which warms for it, and then the job starts.
TEST_F(DatasetControllerTest, OnJobWarmsForABeforeStartJobWaitingForItThatThenStarts) {
  cacheNode("a");
  startOperator({}, true);
  createDataset("", "coco", ", warm: OnJob");
  ASSERT_TRUE(waitPhase("OnDemand")) << dataset().serialize();
  ASSERT_TRUE(client()
                  .create(resources::trainingJobs(), ns(),
                          yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: "
                               "{name: bert}\nspec:\n  warmPolicy: BeforeStart\n  datasets: "
                               "[{name: coco, mountPath: /data}]\n  template: {spec: "
                               "{containers: [{name: trainer, image: pytorch}]}}"))
                  .isOk());
  ASSERT_TRUE(waitPhase("Ready")) << "the waiting job is its reader: " << dataset().serialize();
  EXPECT_EQ(statusInt("cachedBytes"), totalBytes_);
  EXPECT_TRUE(eventually(
      [&] { return client().get(resources::pods(), ns(), "bert-worker-0").isOk(); }, 20s))
      << "the job starts once its dataset is Ready";
  auto job = client().get(resources::trainingJobs(), ns(), "bert");
  ASSERT_TRUE(job.isOk()) << job.status();
  EXPECT_EQ(op::conditionOf(kube::pathValue(*job, "status"), "DatasetsReady").reason, "Ready")
      << job->serialize();
}

// OnJob: nothing is warmed until a TrainingJob's worker is placed; the cache nodes are told
// about it and warm. The kubelet's part is played for real: the worker's inline volume is
// published through the node's CSI socket, and a process in the worker pod's cgroup reads the
// dataset through it; the job's status then shows the reads (rate, local share, data wait).
TEST_F(DatasetControllerTest, OnJobWarmsForPlacedWorkersWhoseReadsShowInTheJobStatus) {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
    GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& node = cacheNode("a");
  const std::string nodeName = "a-" + suffix_;
  startOperator({}, true);
  createDataset("", "coco", ", warm: OnJob");
  ASSERT_TRUE(eventually([&] { return statusInt("totalBytes") == totalBytes_; }, 20s))
      << dataset().serialize();
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(statusInt("cachedBytes"), 0) << "OnJob: nothing warms before a job is placed";
  EXPECT_EQ(phase(), "OnDemand") << dataset().serialize();

  ASSERT_TRUE(client()
                  .create(resources::trainingJobs(), ns(),
                          yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: "
                               "{name: bert}\nspec:\n  datasets: [{name: coco, mountPath: "
                               "/data}]\n  template: {spec: {containers: [{name: trainer, "
                               "image: pytorch}]}}"))
                  .isOk());
  const Json worker = createdWorker();
  ASSERT_FALSE(worker.is_null());
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(statusInt("cachedBytes"), 0) << "a worker not yet placed does not start warming";
  ASSERT_TRUE(runOn(nodeName));
  ASSERT_TRUE(waitPhase("Ready")) << dataset().serialize();
  EXPECT_EQ(statusInt("cachedBytes"), totalBytes_);

  // The kubelet publishes the worker's volume; the worker reads every file through it.
  const std::string uid = kube::uidOf(worker);
  const auto target = root_ / "kubelet" / uid / "data";
  auto channel = grpc::CreateChannel(node.csiAddress(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + 10s));
  csi::v1::NodePublishVolumeRequest publish;
  publish.set_volume_id("csi-" + uid);
  publish.set_target_path(target.string());
  publish.set_readonly(true);
  publish.mutable_volume_capability()->mutable_mount();
  publish.mutable_volume_context()->insert({{"dataset", "coco"},
                                            {"csi.storage.k8s.io/ephemeral", "true"},
                                            {"csi.storage.k8s.io/pod.namespace", ns()},
                                            {"csi.storage.k8s.io/pod.name", "bert-worker-0"},
                                            {"csi.storage.k8s.io/pod.uid", uid}});
  {
    grpc::ClientContext context;
    csi::v1::NodePublishVolumeResponse response;
    const grpc::Status published =
        csi::v1::Node::NewStub(channel)->NodePublishVolume(&context, publish, &response);
    ASSERT_TRUE(published.ok()) << published.error_message();
  }
  const int read = runInPodCgroup(uid, "find '" + target.string() +
                                           "' -type f -exec cat {} + | wc -c | grep -qx " +
                                           std::to_string(totalBytes_));
  {
    grpc::ClientContext context;
    csi::v1::NodeUnpublishVolumeRequest unpublish;
    unpublish.set_volume_id(publish.volume_id());
    unpublish.set_target_path(target.string());
    csi::v1::NodeUnpublishVolumeResponse response;
    EXPECT_TRUE(
        csi::v1::Node::NewStub(channel)->NodeUnpublishVolume(&context, unpublish, &response).ok());
  }
  if (read < 0) GTEST_SKIP() << "no writable cgroup hierarchy to run a reader as the pod";
  ASSERT_EQ(read, 0) << "the worker read every byte of the dataset through its volume";
  const auto data = [&] {
    auto got = client().get(resources::trainingJobs(), ns(), "bert");
    return got.isOk() ? kube::pathValue(*got, "status.data") : Json();
  };
  // The sample that saw the reads (status keeps it until the next one, 300 ms later).
  Json figures;
  ASSERT_TRUE(eventually(
      [&] {
        const Json d = data();
        if (d.has_integer_field("readBytesPerSecond") &&
            d.at("readBytesPerSecond").as_number().to_int64() > 0)
          figures = d;
        return !figures.is_null();
      },
      20s))
      << "the job's status shows the reads: " << data().serialize();
  EXPECT_EQ(figures.at("localFraction").as_double(), 1.0) << "every chunk was warm on the node";
  EXPECT_GE(figures.at("waitFraction").as_double(), 0.0);
  EXPECT_LE(figures.at("waitFraction").as_double(), 0.1) << "warm reads do not wait";
  // The job's own series, for dashboards and alerts (no GPU here: no GPU series).
  const std::string waitSeries =
      "granary_job_data_wait_ratio{job=\"bert\",namespace=\"" + ns() + "\"}";
  EXPECT_NE(registry_.exposition().find(waitSeries), std::string::npos) << registry_.exposition();
  EXPECT_EQ(registry_.exposition().find("granary_job_gpu_utilization_ratio{"), std::string::npos);
  // Reads stopped: the next samples say so, and then the status stays as it is.
  ASSERT_TRUE(
      eventually([&] { return data().at("readBytesPerSecond").as_number().to_int64() == 0; }, 20s))
      << data().serialize();
  // Then the operator falls quiet: a window of 1.5 s (five telemetry samples, three Dataset
  // polls) without a write comes soon; an operator that rewrote an unchanged status on every
  // poll never has one.
  std::string lastWrite;
  const bool quiet = eventually(
      [&] {
        auto before = client().get(resources::trainingJobs(), ns(), "bert");
        const int64_t writes = operatorWrites_;
        std::this_thread::sleep_for(1500ms);
        auto after = client().get(resources::trainingJobs(), ns(), "bert");
        std::lock_guard lock(writesMutex_);
        lastWrite = lastWrite_;
        return before.isOk() && after.isOk() && operatorWrites_ == writes &&
               kube::resourceVersionOf(*after) == kube::resourceVersionOf(*before);
      },
      20s);
  EXPECT_TRUE(quiet) << "no write while nothing changed; the last: " << lastWrite;

  // A job that is gone takes its series with it.
  ASSERT_TRUE(client().remove(resources::trainingJobs(), ns(), "bert").isOk());
  EXPECT_TRUE(
      eventually([&] { return registry_.exposition().find(waitSeries) == std::string::npos; }, 20s))
      << registry_.exposition();
}

// A worker's view of its dataset ends (the node's pod killed hard, no keeper to hold the mount):
// the node names the pod, the operator marks it and says so in an Event on the pod and one on the
// Dataset, the Dataset's ReadersCutOff condition names it, and the job's gang restarts (a
// disruption: not counted against backoffLimit). Once the old pod's volume is unpublished, the
// condition turns False.
TEST_F(DatasetControllerTest, AWorkerCutOffFromItsDatasetIsNamedAndItsGangRestarted) {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
    GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& node = cacheNode("a");
  const std::string nodeName = "a-" + suffix_;
  startOperator({}, true);
  createDataset();
  ASSERT_TRUE(waitPhase("Ready")) << dataset().serialize();
  createJob(0);
  const Json worker = createdWorker();
  const std::string uid = kube::uidOf(worker);
  ASSERT_TRUE(runOn(nodeName));
  const auto target = root_ / "kubelet" / uid / "data";
  const testing::PodVolume volume{
      .dataset = "coco", .podNamespace = ns(), .podName = "bert-worker-0", .podUid = uid};
  ASSERT_TRUE(testing::publishVolume(node, target, volume).ok());

  node.kill(SIGKILL);  // the mount dies with the node: the worker's copy of it is dead
  node.start();        // the operator ensures the dataset again; the node binds the view again
  // The operator reaches the node again within a second of its answering (its channels' reconnect
  // backoff is capped), then ensures the dataset, and the node names the pod cut off.
  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_TRUE(hasEvent("Warning/DatasetMountLost", 60s)) << ::testing::PrintToString(events());
  std::cerr << "DatasetMountLost "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - restarted).count()
            << " s after the node answered again\n";
  ASSERT_TRUE(hasEvent("Warning/ReadersCutOff")) << ::testing::PrintToString(events());
  const op::Condition cutOff =
      op::conditionOf(kube::pathValue(dataset(), "status"), "ReadersCutOff");
  EXPECT_TRUE(cutOff.status) << dataset().serialize();
  EXPECT_NE(cutOff.message.find(ns() + "/bert-worker-0 on " + nodeName), std::string::npos)
      << cutOff.message;
  EXPECT_NE(readyCondition().message.find("see ReadersCutOff"), std::string::npos);
  // The gang restarts: a new worker of attempt 1; the job is not failed (backoffLimit 0).
  Json job;
  ASSERT_TRUE(eventually([&] {
    auto got = client().get(resources::trainingJobs(), ns(), "bert");
    if (got.isOk()) job = *got;
    return got.isOk() && kube::pathValue(job, "status.restarts").is_integer() &&
           kube::pathValue(job, "status.restarts").as_number().to_int64() == 1;
  })) << job.serialize();
  EXPECT_NE(job.serialize().find("WorkerMountLost"), std::string::npos) << job.serialize();
  EXPECT_NE(kube::pathValue(job, "status.phase").as_string(), "Failed") << job.serialize();
  // The old pod's volume goes with it (the kubelet unpublishes it): no pod is cut off any more.
  ASSERT_TRUE(testing::unpublishVolume(node, target).ok());
  EXPECT_TRUE(eventually([&] {
    const op::Condition now =
        op::conditionOf(kube::pathValue(dataset(), "status"), "ReadersCutOff");
    return !now.status && now.reason == "NoneCutOff";
  })) << dataset().serialize();
}

TEST_F(DatasetControllerTest, AReferenceInAnotherNamespaceReadsTheOwnersCacheWithNoOriginRead) {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
    GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& node = cacheNode("a");
  const std::string team = otherNamespace();
  ASSERT_FALSE(team.empty());
  startOperator();
  offerDataset(team);
  const int64_t originBytes = origin_->bytesServed();
  EXPECT_EQ(originBytes, totalBytes_);

  // The whole dataset, and one directory of it; neither names a Secret.
  ASSERT_TRUE(createReference(team, "coco", "dataset://" + ns() + "/coco").isOk());
  ASSERT_TRUE(createReference(team, "train", "dataset://" + ns() + "/coco/train/").isOk());
  for (const char* name : {"coco", "train"}) {
    ASSERT_TRUE(eventually([&] { return phaseIn(team, name) == "Ready"; }, 30s))
        << datasetIn(team, name).serialize();
    const Json status = datasetIn(team, name).at("status");
    EXPECT_EQ(status.at("totalBytes").as_number().to_int64(), totalBytes_);
    EXPECT_EQ(status.at("cachedBytes").as_number().to_int64(), totalBytes_);
    ASSERT_EQ(status.at("nodes").size(), 1u) << "placed where the source's cache lives";
    EXPECT_EQ(status.at("nodes").at(0).at("name").as_string(), "a-" + suffix_);
    EXPECT_EQ(readyIn(team, name).reason, "Cached");
  }
  ASSERT_TRUE(eventually(
      [&] {
        return referredBy() == std::vector<std::string>{team + "/coco", team + "/train"};
      },
      20s))
      << dataset().serialize();

  // A pod of the team mounts each through CSI, as a Dataset of its own namespace.
  ASSERT_TRUE(publishVolume(node, team, "coco", "pod-whole").ok());
  ASSERT_TRUE(publishVolume(node, team, "train", "pod-train").ok());
  EXPECT_EQ(filesMatchingOrigin("pod-whole", root_ / "origin"), 12);
  EXPECT_EQ(filesMatchingOrigin("pod-train", root_ / "origin" / "train"), 12);
  EXPECT_FALSE(std::filesystem::exists(root_ / "kubelet" / "pod-train" / "data" / "train"))
      << "a view of a directory shows that directory at its root";
  unpublishVolume(node, "pod-whole");
  unpublishVolume(node, "pod-train");
  EXPECT_EQ(origin_->bytesServed(), originBytes) << "no byte read from the origin again";
  EXPECT_EQ(heldGenerations(node), std::vector<int64_t>{1}) << "one copy on the node";

  // A namespace the owner does not offer it to is refused; it cannot mount it either.
  const std::string stranger = otherNamespace();
  ASSERT_TRUE(createReference(stranger, "coco", "dataset://" + ns() + "/coco").isOk());
  ASSERT_TRUE(eventually([&] { return readyIn(stranger, "coco").reason == "NotOffered"; }, 20s))
      << datasetIn(stranger, "coco").serialize();
  EXPECT_EQ(phaseIn(stranger, "coco"), "Failed");
  EXPECT_NE(readyIn(stranger, "coco").message.find("spec.sharing.namespaces"), std::string::npos)
      << readyIn(stranger, "coco").message;
  EXPECT_EQ(publishVolume(node, stranger, "coco", "pod-stranger").error_code(),
            grpc::StatusCode::NOT_FOUND);
  // Nor may a reference be the source of another.
  ASSERT_TRUE(createReference(stranger, "chain", "dataset://" + team + "/coco").isOk());
  ASSERT_TRUE(
      eventually([&] { return readyIn(stranger, "chain").reason == "SourceIsReference"; }, 20s))
      << datasetIn(stranger, "chain").serialize();
  EXPECT_NE(readyIn(stranger, "chain").message.find("dataset://" + ns() + "/coco"),
            std::string::npos);

  // The owner withdraws the offer: the references say so and no new pod mounts them.
  ASSERT_TRUE(client()
                  .mergePatch(resources::datasets(), ns(), "coco",
                              yaml("spec: {sharing: {namespaces: []}}"))
                  .isOk());
  ASSERT_TRUE(eventually([&] { return readyIn(team, "coco").reason == "OfferWithdrawn"; }, 20s))
      << datasetIn(team, "coco").serialize();
  EXPECT_EQ(phaseIn(team, "coco"), "Failed");
  EXPECT_TRUE(eventually(
      [&] {
        return publishVolume(node, team, "coco", "pod-late").error_code() ==
               grpc::StatusCode::NOT_FOUND;
      },
      20s));
  EXPECT_TRUE(eventually([&] { return referredBy().empty(); }, 20s)) << dataset().serialize();
  EXPECT_EQ(phase(), "Ready") << "the owner's cache is untouched";
  EXPECT_EQ(statusInt("cacheGeneration"), 1) << "a change of sharing alone caches nothing again";
  EXPECT_EQ(heldGenerations(node), std::vector<int64_t>{1});
  EXPECT_EQ(origin_->bytesServed(), originBytes);
}

TEST_F(DatasetControllerTest, AJobWaitingOnAReferenceWarmsItsSourceAndThenStarts) {
  cacheNode("a");
  const std::string team = otherNamespace();
  ASSERT_FALSE(team.empty());
  startOperator({}, true);
  createDataset("", "coco", ", warm: OnJob}\n  sharing: {namespaces: [" + team + "]");
  ASSERT_TRUE(waitPhase("OnDemand")) << dataset().serialize();
  ASSERT_TRUE(createReference(team, "coco", "dataset://" + ns() + "/coco").isOk());
  ASSERT_TRUE(eventually([&] { return phaseIn(team, "coco") == "OnDemand"; }, 20s))
      << datasetIn(team, "coco").serialize();
  // The other team's job names its reference and waits for it (BeforeStart): it is a reader of
  // the source, which warms for it.
  ASSERT_TRUE(client()
                  .create(resources::trainingJobs(), team,
                          yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: "
                               "{name: bert}\nspec:\n  warmPolicy: BeforeStart\n  datasets: "
                               "[{name: coco, mountPath: /data}]\n  template: {spec: "
                               "{containers: [{name: trainer, image: pytorch}]}}"))
                  .isOk());
  ASSERT_TRUE(waitPhase("Ready")) << "the job of the reference is its reader: "
                                  << dataset().serialize();
  EXPECT_EQ(statusInt("cachedBytes"), totalBytes_);
  EXPECT_TRUE(eventually(
      [&] { return client().get(resources::pods(), team, "bert-worker-0").isOk(); }, 20s))
      << "the job starts once the reference is Ready";
}

TEST_F(DatasetControllerTest, EitherDeletionOrderLeavesTheOtherDatasetWhole) {
  NodeProcess& node = cacheNode("a");
  const std::string team = otherNamespace();
  ASSERT_FALSE(team.empty());
  startOperator();
  // The reference first: it waits for its source, which comes after it.
  ASSERT_TRUE(createReference(team, "coco", "dataset://" + ns() + "/coco").isOk());
  ASSERT_TRUE(eventually([&] { return readyIn(team, "coco").reason == "SourceNotFound"; }, 20s))
      << datasetIn(team, "coco").serialize();
  EXPECT_EQ(phaseIn(team, "coco"), "Pending");
  createDataset("", "coco", "}\n  sharing: {namespaces: [" + team + "]");
  ASSERT_TRUE(eventually([&] { return phaseIn(team, "coco") == "Ready"; }, 30s))
      << datasetIn(team, "coco").serialize();
  const int64_t originBytes = origin_->bytesServed();

  // The reference deleted: the owner keeps every byte, and lists it no more.
  ASSERT_TRUE(client().remove(resources::datasets(), team, "coco").isOk());
  ASSERT_TRUE(eventually([&] { return datasetIn(team, "coco").is_null(); }, 20s));
  ASSERT_TRUE(eventually([&] { return referredBy().empty(); }, 20s)) << dataset().serialize();
  EXPECT_EQ(phase(), "Ready");
  EXPECT_EQ(statusInt("cachedBytes"), totalBytes_);
  EXPECT_EQ(heldGenerations(node), std::vector<int64_t>{1});

  // Referred to again, then the owner deleted: its cache goes, and the reference says why.
  ASSERT_TRUE(createReference(team, "coco", "dataset://" + ns() + "/coco").isOk());
  ASSERT_TRUE(eventually([&] { return phaseIn(team, "coco") == "Ready"; }, 30s));
  EXPECT_EQ(origin_->bytesServed(), originBytes);
  ASSERT_TRUE(client().remove(resources::datasets(), ns(), "coco").isOk());
  ASSERT_TRUE(eventually([&] { return dataset().is_null(); }, 20s));
  ASSERT_TRUE(eventually([&] { return readyIn(team, "coco").reason == "SourceNotFound"; }, 20s))
      << datasetIn(team, "coco").serialize();
  EXPECT_TRUE(heldGenerations(node).empty());
  EXPECT_TRUE(kube::pathValue(datasetIn(team, "coco"), "status.nodes").is_null())
      << "a refused reference lists no node, so no job is placed by it";
}

TEST_F(DatasetControllerTest, ARefreshMakesANewVersionForNewReadersWhileOldReadersKeepTheirs) {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
    GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& a = cacheNode("a");
  NodeProcess& b = cacheNode("b");
  startOperator();
  createDataset();
  ASSERT_TRUE(waitPhase("Ready")) << dataset().serialize();
  ASSERT_TRUE(eventually([&] { return statusInt("version") == 1; })) << dataset().serialize();
  EXPECT_EQ(kube::pathValue(dataset(), "status.refresh").is_null(), true)
      << "no refresh without spec.refresh or the annotation";
  snapshotOrigin(root_ / "v1");
  ASSERT_TRUE(publishVolume(a, ns(), "coco", "old").ok());
  changeOrigin();
  snapshotOrigin(root_ / "v2");
  requestRefresh("1");

  ASSERT_TRUE(eventually([&] { return statusInt("version") > 1 && phase() == "Ready"; }, 60s))
      << dataset().serialize();
  const int64_t version = statusInt("version");
  EXPECT_EQ(statusString("refresh.state"), "Changed");
  EXPECT_EQ(statusInt("refresh.added"), 1);
  EXPECT_EQ(statusInt("refresh.changed"), 1);
  EXPECT_EQ(statusInt("refresh.removed"), 1);
  EXPECT_EQ(statusString("refresh.observedRequest"), "1");
  EXPECT_TRUE(hasEvent("Normal/Refreshed")) << ::testing::PrintToString(events());
  // The pod that mounted version 1 reads version 1, every byte, the file since removed too
  // (on node a, taking from node b the chunks b owns).
  EXPECT_EQ(filesMatchingOrigin("old", root_ / "v1"), 12);
  // A pod that mounts now reads the new version.
  ASSERT_TRUE(publishVolume(a, ns(), "coco", "new").ok());
  EXPECT_EQ(filesMatchingOrigin("new", root_ / "v2"), 12);
  EXPECT_FALSE(
      std::filesystem::exists(root_ / "kubelet" / "new" / "data" / "train" / "part-11.bin"));
  // Version 1 stays on every node while a pod reads it, and goes once none does.
  EXPECT_EQ(heldVersions(a), (std::set<int64_t>{1, version}));
  EXPECT_EQ(heldVersions(b), (std::set<int64_t>{1, version}));
  unpublishVolume(a, "old");
  EXPECT_TRUE(eventually([&] {
    return heldVersions(a) == std::set<int64_t>{version} &&
           heldVersions(b) == std::set<int64_t>{version};
  })) << ::testing::PrintToString(heldGenerations(a));

  // Asked again with nothing changed: no new version, only the refresh's time and outcome. Every
  // status written is watched: the outcome, and before it `Running` only when the listing
  // outlasts the second after which a running refresh is shown.
  const auto withoutRefresh = [](Json status) {
    kube::eraseField(status, "refresh");
    return status;
  };
  const Json before = withoutRefresh(settledStatus());
  const Json watchedFrom = dataset();
  std::mutex seenMutex;
  std::vector<Json> statusesSeen;  // each status the Dataset took since watchedFrom
  std::jthread watcher([&](std::stop_token stop) {
    (void)client().watch(
        resources::datasets(), ns(),
        {.fieldSelector = "metadata.name=coco",
         .resourceVersion = kube::pathValue(watchedFrom, "metadata.resourceVersion").as_string()},
        [&](kube::WatchEvent&& e) {
          if (e.type != kube::WatchEvent::Type::kModified) return;
          const Json status = kube::pathValue(e.object, "status");
          std::lock_guard lock(seenMutex);
          const Json& last =
              statusesSeen.empty() ? kube::pathValue(watchedFrom, "status") : statusesSeen.back();
          if (!kube::sameJson(status, last)) statusesSeen.push_back(status);
        },
        stop);
  });
  const int64_t writes = operatorWrites_;
  requestRefresh("2");
  ASSERT_TRUE(eventually([&] { return statusString("refresh.observedRequest") == "2"; }, 30s))
      << dataset().serialize();
  std::this_thread::sleep_for(1500ms);  // a further write, were there one, would come by now
  watcher.request_stop();
  {
    std::lock_guard lock(writesMutex_);
    std::lock_guard seen(seenMutex);
    ASSERT_FALSE(statusesSeen.empty());
    EXPECT_EQ(operatorWrites_ - writes, static_cast<int64_t>(statusesSeen.size()))
        << "each status write changes the status; the last: " << lastWrite_;
    EXPECT_LE(statusesSeen.size(), 2u) << ::testing::PrintToString(statusesSeen.size());
    for (size_t i = 0; i < statusesSeen.size(); ++i) {
      EXPECT_TRUE(kube::sameJson(withoutRefresh(statusesSeen[i]), before))
          << "a write changes status.refresh only: " << statusesSeen[i].serialize()
          << "\nbefore: " << before.serialize();
      const Json state = kube::pathValue(statusesSeen[i], "refresh.state");
      EXPECT_EQ(state.as_string(), i + 1 == statusesSeen.size() ? "Unchanged" : "Running");
    }
  }
  EXPECT_EQ(statusString("refresh.state"), "Unchanged");
  EXPECT_EQ(
      statusInt("refresh.added") + statusInt("refresh.changed") + statusInt("refresh.removed"), 0);
  EXPECT_TRUE(kube::sameJson(withoutRefresh(kube::pathValue(dataset(), "status")), before))
      << dataset().serialize() << "\nbefore: " << before.serialize();
  EXPECT_EQ(heldVersions(a), std::set<int64_t>{version});
  unpublishVolume(a, "new");
}

TEST_F(DatasetControllerTest, AFileTheOriginRemovedFailsInTheOldVersionAndAnEventNamesIt) {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
    GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& a = cacheNode("a");
  startOperator();
  createDataset("", "coco", ", warm: Never");  // nothing cached until read
  ASSERT_TRUE(waitPhase("OnDemand")) << dataset().serialize();
  ASSERT_TRUE(publishVolume(a, ns(), "coco", "old").ok());
  changeOrigin();
  requestRefresh("1");
  ASSERT_TRUE(eventually([&] { return statusInt("version") > 1 && phase() == "OnDemand"; }, 60s))
      << dataset().serialize();
  // The pod on version 1 reads a file the origin no longer has: an error, never another
  // version's bytes.
  std::ifstream removed(root_ / "kubelet" / "old" / "data" / "train" / "part-11.bin",
                        std::ios::binary);
  ASSERT_TRUE(removed.is_open()) << "version 1 still names the file";
  std::string data(100, '\0');
  removed.read(data.data(), static_cast<std::streamsize>(data.size()));
  EXPECT_TRUE(removed.bad() || removed.gcount() == 0) << "read " << removed.gcount() << " bytes";
  EXPECT_TRUE(hasEvent("Warning/FilesGoneFromOrigin")) << ::testing::PrintToString(events());
  bool named = false;
  for (const auto& e : events())
    named = named || (e.starts_with("Warning/FilesGoneFromOrigin: version 1 ") &&
                      e.find("train/part-11.bin") != std::string::npos);
  EXPECT_TRUE(named) << ::testing::PrintToString(events());
  unpublishVolume(a, "old");
}

TEST_F(DatasetControllerTest, AReferenceFollowsItsSourcesVersionsAndItsReadersKeepTheirs) {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
    GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& node = cacheNode("a");
  const std::string team = otherNamespace();
  ASSERT_FALSE(team.empty());
  startOperator();
  offerDataset(team);
  ASSERT_TRUE(createReference(team, "coco", "dataset://" + ns() + "/coco").isOk());
  ASSERT_TRUE(eventually([&] { return phaseIn(team, "coco") == "Ready"; }, 30s))
      << datasetIn(team, "coco").serialize();
  snapshotOrigin(root_ / "v1");
  ASSERT_TRUE(publishVolume(node, team, "coco", "team-old").ok());
  changeOrigin();
  snapshotOrigin(root_ / "v2");
  requestRefresh("1");
  ASSERT_TRUE(eventually(
      [&] {
        const Json v = kube::pathValue(datasetIn(team, "coco"), "status.version");
        return v.is_integer() && v.as_number().to_int64() > 1 && phaseIn(team, "coco") == "Ready";
      },
      60s))
      << datasetIn(team, "coco").serialize();
  // The reference shows its source's version; its reader keeps version 1, a new one reads the
  // new version, and version 1 stays while the reference's pod reads it.
  EXPECT_EQ(kube::pathValue(datasetIn(team, "coco"), "status.version").as_number().to_int64(),
            statusInt("version"));
  EXPECT_EQ(filesMatchingOrigin("team-old", root_ / "v1"), 12);
  ASSERT_TRUE(publishVolume(node, team, "coco", "team-new").ok());
  EXPECT_EQ(filesMatchingOrigin("team-new", root_ / "v2"), 12);
  EXPECT_EQ(heldVersions(node), (std::set<int64_t>{1, statusInt("version")}));
  unpublishVolume(node, "team-old");
  EXPECT_TRUE(eventually([&] { return heldVersions(node).size() == 1; }))
      << ::testing::PrintToString(heldGenerations(node));
  unpublishVolume(node, "team-new");
}

TEST_F(DatasetControllerTest, ARefreshThatCannotListTheOriginKeepsTheVersionServing) {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
    GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
  NodeProcess& a = cacheNode("a");
  startOperator();
  createDataset();
  ASSERT_TRUE(waitPhase("Ready")) << dataset().serialize();
  snapshotOrigin(root_ / "v1");
  origin_.reset();  // the origin goes away
  requestRefresh("1");
  ASSERT_TRUE(eventually([&] { return statusString("refresh.state") == "Failed"; }, 60s))
      << dataset().serialize();
  EXPECT_EQ(phase(), "Ready");
  EXPECT_EQ(statusInt("version"), 1);
  const op::Condition failed =
      op::conditionOf(kube::pathValue(dataset(), "status"), "RefreshFailed");
  EXPECT_TRUE(failed.status) << dataset().serialize();
  EXPECT_NE(failed.message.find("version 1 still serves; tried again at"), std::string::npos)
      << failed.message;
  EXPECT_FALSE(statusString("refresh.nextTime").empty());
  EXPECT_TRUE(hasEvent("Warning/RefreshFailed")) << ::testing::PrintToString(events());
  EXPECT_EQ(heldVersions(a), std::set<int64_t>{1}) << "nothing half-listed is kept";
  ASSERT_TRUE(publishVolume(a, ns(), "coco", "reader").ok());
  EXPECT_EQ(filesMatchingOrigin("reader", root_ / "v1"), 12);
  unpublishVolume(a, "reader");
}

TEST_F(DatasetControllerTest, AJobKeepsTheVersionItsWorkersFirstReadThroughAGangRestart) {
  cacheNode("a");
  const std::string nodeName = "a-" + suffix_;
  startOperator({}, true);
  createDataset();
  ASSERT_TRUE(waitPhase("Ready")) << dataset().serialize();
  createJob(3);
  const auto versionOf = [](const Json& pod) {
    const Json volumes = kube::pathValue(pod, "spec.volumes");
    for (const auto& v : volumes.as_array())
      if (v.has_object_field("csi")) {
        const Json attribute = kube::pathValue(v, "csi.volumeAttributes.version");
        return attribute.is_string() ? attribute.as_string() : std::string("none");
      }
    return std::string("no volume");
  };
  Json worker = createdWorker();
  EXPECT_EQ(versionOf(worker), "1") << worker.serialize();
  ASSERT_TRUE(runOn(nodeName));
  changeOrigin();
  requestRefresh("1");
  ASSERT_TRUE(eventually([&] { return statusInt("version") > 1 && phase() == "Ready"; }, 60s))
      << dataset().serialize();
  // The worker fails: its gang restarts on version 1, which the node keeps for it.
  const std::string firstUid = kube::uidOf(worker);
  ASSERT_TRUE(client()
                  .mergePatch(resources::pods(), ns(), "bert-worker-0",
                              yaml("status: {phase: Failed, containerStatuses: [{name: trainer, "
                                   "state: {terminated: {exitCode: 1}}}]}"),
                              "status")
                  .isOk());
  ASSERT_TRUE(eventually([&] {
    auto got = client().get(resources::pods(), ns(), "bert-worker-0");
    if (got.isOk()) worker = *got;
    return got.isOk() && kube::uidOf(*got) != firstUid;
  })) << "the gang was not restarted";
  EXPECT_EQ(versionOf(worker), "1") << worker.serialize();
  auto job = client().get(resources::trainingJobs(), ns(), "bert");
  ASSERT_TRUE(job.isOk());
  EXPECT_EQ(kube::pathValue(*job, "status.datasetVersions.coco").as_number().to_int64(), 1)
      << job->serialize();
  EXPECT_TRUE(heldVersions(*processes_["a-" + suffix_]).contains(1))
      << "a version a running job reads is kept";
}

}  // namespace
}  // namespace granary::testing
