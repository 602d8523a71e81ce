// The chart's workloads run as rendered: granary-operator, granary-scheduler, granary-cache-node
// and its mount keeper are started with the commands, arguments, environment, options file and
// token that `helm template charts/granary` gives their containers, against the API-server double
// (or a real cluster, GRANARY_TEST_KUBECONFIG). What a pod provides is stood in for on this
// machine, and only that: the in-cluster API config becomes a kubeconfig (--kubeconfig, with the
// release's namespace as the pod's), each path a container sees is placed under a directory of
// the test, each listening address moves to loopback, and each port of a pod to a free one (the
// same map for a pod's container ports and its processes). Then they must reach Ready and cache a
// Dataset, and a TrainingJob's workers must be created, placed by the scheduler and succeed.
#include <cpprest/asyncrt_utils.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/child_process.h"
#include "tests/support/cluster.h"
#include "tests/support/free_port.h"
#include "tests/support/helm_chart.h"
#include "tests/support/http_get.h"
#include "tests/support/scratch_tree.h"

namespace granary::testing {
namespace {

using kube::Json;
namespace resources = kube::resources;
using namespace std::chrono_literals;

// One pod of the chart on this machine: its own port map.
struct PodStandIn {
  std::map<int, int> ports;  // a container port -> the free port that stands in for it
  int port(int rendered) {
    auto [it, added] = ports.try_emplace(rendered, 0);
    if (added) it->second = freePort();
    return it->second;
  }
};

class ChartWorkloads : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    if (HasFatalFailure()) return;
    suffix_ = ns().substr(ns().rfind('-') + 1);
    root_ = std::filesystem::temp_directory_path() / ("granary-chart-" + suffix_);
    std::filesystem::create_directories(root_);
    // The node's file systems are shared mounts (as systemd makes them), which the cache node's
    // mountPropagation: Bidirectional volumes need: the test's directory, bound onto itself.
    const bool bound = ::mount(root_.c_str(), root_.c_str(), nullptr, MS_BIND, nullptr) == 0;
    if (!bound || ::mount(nullptr, root_.c_str(), nullptr, MS_SHARED, nullptr) != 0)
      GTEST_SKIP() << "standing in for a node's shared mounts needs root: " << std::strerror(errno);
    std::string error;
    // One node directory open to file:// sources (none by default), for the Dataset below.
    docs_ = renderChart(ns(), error, "--set 'cacheNode.fileOriginRoots={shared:/srv/datasets}'");
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_TRUE(writeKubeconfig(cluster_->restConfig(), ns(), root_ / "kubeconfig").isOk());
    writeSecretsAndConfig();
  }
  void TearDown() override {
    processes_.clear();
    // A Dataset the operator had no time to purge keeps its finalizer: drop it, so that the
    // namespace can go.
    if (auto left = client().list(resources::datasets(), ns()); left.isOk())
      for (const auto& dataset : left->items)
        (void)edit(client(), resources::datasets(), ns(), kube::nameOf(dataset),
                   [](Json& d) { d["metadata"].erase("finalizers"); });
    testNode_.reset();
    removeTree(root_);  // its bind mount and any mount a killed node left
    ClusterTest::TearDown();
  }

  // A path a container sees, placed under the test's directory.
  std::string onThisMachine(const std::string& path) const {
    return (root_ / std::filesystem::path(path).relative_path()).string();
  }
  // An argument or option value as the stand-in needs it: paths moved under the test's
  // directory, "0.0.0.0:PORT" to loopback and the pod's stand-in port.
  std::string standIn(const std::string& value, PodStandIn& pod) const {
    if (value.starts_with("0.0.0.0:"))
      return "127.0.0.1:" + std::to_string(pod.port(std::stoi(value.substr(8))));
    if (value.starts_with("/")) return onThisMachine(value);
    return value;
  }

  // The token Secret's value and the cache node's options file, where the pods mount them.
  void writeSecretsAndConfig() {
    const YAML::Node secret = findObject(docs_, "Secret", "granary-cache-node-token");
    ASSERT_TRUE(secret) << "the chart makes the token Secret";
    const auto token = utility::conversions::from_base64(secret["data"]["token"].as<std::string>());
    std::filesystem::create_directories(onThisMachine("/etc/granary/token"));
    std::ofstream(onThisMachine("/etc/granary/token/token"))
        << std::string(token.begin(), token.end());

    YAML::Node options =
        YAML::Load(findObject(docs_, "ConfigMap", "granary-cache-node")["data"]["cache-node.yaml"]
                       .as<std::string>());
    for (const auto& field : options) {
      YAML::Node value = field.second;  // a handle on the option: assigning changes it
      if (value.IsScalar()) value = standIn(value.as<std::string>(), cacheNodePod_);
    }
    for (YAML::Node directory : options["cacheDirectories"])
      directory["path"] = onThisMachine(directory["path"].as<std::string>());
    for (YAML::Node root : options["fileOriginRoots"]) {
      const std::string named = root.as<std::string>();  // "shared:/srv/datasets"
      const size_t path = named.find('/');
      root = named.substr(0, path) + onThisMachine(named.substr(path));
    }
    for (YAML::Node shared : options["sharedMounts"])
      shared = onThisMachine(shared.as<std::string>());
    std::filesystem::create_directories(onThisMachine("/etc/granary/config"));
    std::ofstream(onThisMachine("/etc/granary/config/cache-node.yaml")) << options << "\n";
    for (const char* dir : {"/csi", "/run/granary-keeper"})
      std::filesystem::create_directories(onThisMachine(dir));
  }

  // Starts a container of a rendered workload as a process of this machine.
  ChildProcess& run(const std::string& kind, const std::string& name, const std::string& container,
                    PodStandIn& pod, bool inCluster) {
    const YAML::Node workload = findObject(docs_, kind, name);
    EXPECT_TRUE(workload) << kind << "/" << name;
    YAML::Node spec;
    for (const auto& c : workload["spec"]["template"]["spec"]["containers"])
      if (c["name"].as<std::string>() == container) spec.reset(c);
    EXPECT_TRUE(spec) << name << " has no container " << container;
    const std::string binary = spec["command"][0].as<std::string>();
    std::vector<std::string> argv{binaryOf(binary)};
    for (const auto& arg : spec["args"]) {
      const std::string a = arg.as<std::string>();
      const auto equals = a.find('=');
      argv.push_back(equals == std::string::npos
                         ? a
                         : a.substr(0, equals + 1) + standIn(a.substr(equals + 1), pod));
    }
    if (inCluster) argv.push_back("--kubeconfig=" + (root_ / "kubeconfig").string());
    std::map<std::string, std::string> env;
    // The node's name from the downward API, and plain values (the NVIDIA runtime's requests).
    for (const auto& e : spec["env"]) {
      const std::string key = e["name"].as<std::string>();
      if (e["value"]) {
        env[key] = e["value"].as<std::string>();
        continue;
      }
      EXPECT_EQ(e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(), "spec.nodeName")
          << key << ": the only environment taken from the pod is the node's name";
      env[key] = node_;
    }
    auto& process = processes_.emplace_back(
        std::make_unique<ChildProcess>(argv, root_ / (name + "-" + container + ".log"), env));
    process->start();
    return *process;
  }
  static std::string binaryOf(const std::string& command) {
    const std::string name = std::filesystem::path(command).filename();
    if (name == "granary-operator") return GRANARY_OPERATOR_BINARY;
    if (name == "granary-scheduler") return GRANARY_SCHEDULER_BINARY;
    if (name == "granary-cache-node") return GRANARY_CACHE_NODE_BINARY;
    ADD_FAILURE() << "the chart runs " << command << ", which is not a granary binary";
    return command;
  }

  // The node and the cache node's pod object, from the DaemonSet's pod template, as the
  // DaemonSet controller and the kubelet would make them.
  void cacheNodePodObject() {
    node_ = "chart-node-" + suffix_;
    testNode_ = std::make_unique<TestNode>(client(), node_, R"(
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
)");
    ASSERT_TRUE(testNode_->status().isOk()) << testNode_->status();
    YAML::Node tmpl =
        YAML::Clone(findObject(docs_, "DaemonSet", "granary-cache-node")["spec"]["template"]);
    Json pod = Json::object();
    pod["metadata"] = Json::object();
    pod["metadata"]["name"] = Json::string("granary-cache-node-" + suffix_);
    pod["metadata"]["labels"] = Json::object();
    for (const auto& label : tmpl["metadata"]["labels"])
      pod["metadata"]["labels"][label.first.as<std::string>()] =
          Json::string(label.second.as<std::string>());
    Json ports = Json::array();
    for (const auto& port : tmpl["spec"]["containers"][0]["ports"]) {
      Json p = Json::object();
      p["name"] = Json::string(port["name"].as<std::string>());
      p["containerPort"] = Json::number(cacheNodePod_.port(port["containerPort"].as<int>()));
      ports[ports.size()] = p;
    }
    pod["spec"] = yaml("{containers: [{name: cache-node, image: granary}]}");
    pod["spec"]["nodeName"] = Json::string(node_);
    pod["spec"]["containers"][0]["ports"] = ports;
    auto created = client().create(resources::pods(), ns(), pod);
    ASSERT_TRUE(created.isOk()) << created.status();
    ASSERT_TRUE(client()
                    .mergePatch(resources::pods(), ns(), kube::nameOf(*created),
                                yaml("status: {podIP: 127.0.0.1, conditions: [{type: Ready, "
                                     "status: \"True\"}]}"),
                                "status")
                    .isOk());
  }

  // Whether the process answers /readyz with 200 on the stand-in of `metricsPort`.
  static bool ready(PodStandIn& pod, int metricsPort) {
    std::string body;
    return httpGet("http://127.0.0.1:" + std::to_string(pod.port(metricsPort)) + "/readyz", body) ==
           200;
  }
  int containerPort(const std::string& kind, const std::string& name, const std::string& port) {
    for (const auto& p :
         findObject(docs_, kind, name)["spec"]["template"]["spec"]["containers"][0]["ports"])
      if (p["name"].as<std::string>() == port) return p["containerPort"].as<int>();
    ADD_FAILURE() << name << " has no port " << port;
    return 0;
  }

  std::string phaseOf(const kube::ResourceType& type, const std::string& name) {
    auto object = client().get(type, ns(), name);
    if (!object.isOk()) return "";
    const Json phase = kube::pathValue(*object, "status.phase");
    return phase.is_string() ? phase.as_string() : "";
  }

  std::string suffix_;
  std::filesystem::path root_;
  std::vector<YAML::Node> docs_;
  std::string node_;
  std::unique_ptr<TestNode> testNode_;
  PodStandIn operatorPod_, schedulerPod_, cacheNodePod_;
  std::vector<std::unique_ptr<ChildProcess>> processes_;
};

TEST_F(ChartWorkloads, TheRenderedWorkloadsReachReadyAndReconcileADatasetAndATrainingJob) {
  cacheNodePodObject();
  if (HasFatalFailure()) return;
  ChildProcess& keeper =
      run("DaemonSet", "granary-cache-node", "mount-keeper", cacheNodePod_, false);
  ChildProcess& cacheNode =
      run("DaemonSet", "granary-cache-node", "cache-node", cacheNodePod_, false);
  ChildProcess& op = run("Deployment", "granary-operator", "operator", operatorPod_, true);
  ChildProcess& scheduler =
      run("Deployment", "granary-scheduler", "scheduler", schedulerPod_, true);

  const int cacheNodeMetrics = containerPort("DaemonSet", "granary-cache-node", "metrics");
  const int operatorMetrics = containerPort("Deployment", "granary-operator", "metrics");
  const int schedulerMetrics = containerPort("Deployment", "granary-scheduler", "metrics");
  EXPECT_TRUE(eventually([&] { return ready(cacheNodePod_, cacheNodeMetrics); }, 30s))
      << cacheNode.log();
  EXPECT_TRUE(eventually([&] { return ready(operatorPod_, operatorMetrics); }, 30s)) << op.log();
  EXPECT_TRUE(eventually([&] { return ready(schedulerPod_, schedulerMetrics); }, 30s))
      << scheduler.log();
  EXPECT_TRUE(keeper.running()) << keeper.log();
  EXPECT_TRUE(std::filesystem::exists(onThisMachine("/csi/csi.sock")))
      << "the CSI plugin serves where the registrar looks";

  // A Dataset of a few files on this machine (in the root the chart opens to file:// sources),
  // cached by the cache node the operator found.
  const auto origin = std::filesystem::path(onThisMachine("/srv/datasets")) / "corpus";
  std::filesystem::create_directories(origin);
  for (int i = 0; i < 4; ++i)
    std::ofstream(origin / ("part-" + std::to_string(i))) << std::string(100000 + i, 'a' + i);
  ASSERT_TRUE(client()
                  .create(resources::datasets(), ns(),
                          yaml("apiVersion: granary.io/v1alpha1\nkind: Dataset\n"
                               "metadata: {name: corpus}\nspec: {source: {uri: \"file://" +
                               origin.string() + "/\"}}"))
                  .isOk());
  ASSERT_TRUE(eventually([&] { return phaseOf(resources::datasets(), "corpus") == "Ready"; }, 60s))
      << op.log() << cacheNode.log();

  // A TrainingJob: its worker created by the operator, bound by the scheduler where the data is.
  ASSERT_TRUE(client()
                  .create(resources::trainingJobs(), ns(), yaml(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: train}
spec:
  workers: 1
  gpusPerWorker: 1
  datasets: [{name: corpus, mountPath: /data}]
  template: {spec: {containers: [{name: trainer, image: busybox}]}}
)"))
                  .isOk());
  std::string placedOn;
  ASSERT_TRUE(eventually(
      [&] {
        auto pod = client().get(resources::pods(), ns(), "train-worker-0");
        if (!pod.isOk()) return false;
        const Json nodeName = kube::pathValue(*pod, "spec.nodeName");
        placedOn = nodeName.is_string() ? nodeName.as_string() : "";
        return !placedOn.empty();
      },
      60s))
      << op.log() << scheduler.log();
  EXPECT_EQ(placedOn, node_);
  ASSERT_TRUE(client()
                  .mergePatch(resources::pods(), ns(), "train-worker-0",
                              yaml("status: {phase: Succeeded, containerStatuses: [{name: trainer, "
                                   "state: {terminated: {exitCode: 0}}}]}"),
                              "status")
                  .isOk());
  EXPECT_TRUE(
      eventually([&] { return phaseOf(resources::trainingJobs(), "train") == "Succeeded"; }, 60s))
      << op.log();

  // Clean up what holds a finalizer while the operator still runs.
  ASSERT_TRUE(client().remove(resources::datasets(), ns(), "corpus").isOk());
  EXPECT_TRUE(eventually(
      [&] {
        return client().get(resources::datasets(), ns(), "corpus").status().code() ==
               StatusCode::kNotFound;
      },
      30s))
      << op.log();
}

}  // namespace
}  // namespace granary::testing
