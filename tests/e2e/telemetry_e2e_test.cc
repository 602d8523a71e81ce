// granary's telemetry end to end, on loopback, with real components and a real Prometheus:
//
//   origin (web server, throttled) ─> granary-cache-node process ─FUSE─> a reader in a pod's cgroup
//                                     │  GPUs: fake NVML (5% busy), attributed by a fake kubelet
//                                     │  /metrics ──────────────┐
//   API-server double <── operator (in process: Dataset and     ├──> Prometheus (scrapes every
//                    │    TrainingJob controllers, as main.cc)  │    1 s, the chart's job and
//                    │    /metrics ─────────────────────────────┤    target labels, its alerts)
//                    └─── granary-scheduler (in process)        │
//                         /metrics ─────────────────────────────┘
//
// granary-scheduler runs in process too and binds the TrainingJob's worker to the cache node's
// Node. The test plays the kubelet: it marks the worker Running, gives it a GPU (PodResources),
// publishes its dataset volume over CSI with the pod's identity and runs a reader in a cgroup
// named like the pod's, so the cache node counts the reader's waits for that pod. Then it holds the
// whole telemetry path to what users see:
//   - the three /metrics endpoints pass `promtool check metrics`;
//   - the TrainingJob's status.gpu shows the GPU's utilization and a data-starved share next to
//     status.data's wait;
//   - every expression of every dashboard panel and template variable, and every alert, read
//     from charts/granary at run time (tests/e2e/telemetry_queries.py), parses in Prometheus,
//     and every panel expression returns a series (kMayBeEmpty lists the exceptions, each with
//     its reason); the variables offer this test's objects;
//   - the data-starved alerts fire for the starved pod.
// With GRANARY_DASHBOARD_PICTURES=<dir>, each panel's query_range over the run is saved there
// as JSON for scripts/render_dashboards.py (scripts/dashboard_pictures.sh).
//
// Needs root, /dev/fuse, a writable cgroup hierarchy, prometheus and promtool (Debian's
// prometheus package); skips, saying which is missing, otherwise.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "common/kube/bootstrap.h"
#include "common/names.h"
#include "csi/v1/csi.grpc.pb.h"
#include "operator/cache_node_client.h"
#include "operator/dataset_controller.h"
#include "operator/job_series.h"
#include "operator/training_job_controller.h"
#include "scheduler/scheduler.h"
#include "tests/e2e/pod_cgroup.h"
#include "tests/e2e/prometheus_server.h"
#include "tests/support/cache_node_process.h"
#include "tests/support/cluster.h"
#include "tests/support/fake_kubelet.h"
#include "tests/support/fake_nvml_scenario.h"
#include "tests/support/free_port.h"
#include "tests/support/http_file_server.h"
#include "tests/support/http_get.h"
#include "tests/support/scratch_tree.h"

namespace granary::testing {
namespace {

using kube::Json;
namespace resources = kube::resources;
using namespace std::chrono_literals;

// Panel expressions that may return no series in this test, each with its reason: an
// expression is let off when it contains `part`. Keep this list short and true; anything a
// healthy run of this test's components should draw does not belong here.
struct MayBeEmpty {
  const char* part;
  const char* reason;
};
constexpr MayBeEmpty kMayBeEmpty[] = {
    {R"(code=~"0|429|5..")",
     "the API-server double answers every request: no 429, 5xx or unanswered request"},
    {"granary_job_workers_running",
     "the job here is not elastic (its membership panels are "
     "tested in tests/operator/training_job_controller_test.cc)"},
    {"granary_job_membership_changes_total", "the job here is not elastic"},
    {"granary_peer_received_bytes_total",
     "one cache node here, with no peer (two are tested in "
     "tests/cache-node/data_plane_process_test.cc)"},
    {"granary_peer_sent_bytes_total", "one cache node here, with no peer"},
    {"granary_peer_failures_total", "one cache node here, with no peer: no transfer to fail"},
    {"granary_job_worker_recovery_seconds", "the job here is not elastic"},
};

// Label names promtool's lint wants in snake_case that the GPU series spell as dcgm-exporter
// does, on purpose (docs/architecture.md: dashboards and queries written for dcgm-exporter work
// on granary's series). promtool's complaint about them is let off; any other is a failure.
const std::set<std::string> kDcgmLabels = {"UUID", "modelName", "Hostname"};
constexpr const char* kCamelCaseLint =
    "label names should be written in 'snake_case' not 'camelCase'";

constexpr const char* kJob = "resnet";
constexpr const char* kWorker = "resnet-worker-0";
constexpr const char* kDataset = "imagenet";
constexpr const char* kCacheNodeNamespace = "granary-system";
constexpr const char* kJobGpu = "GPU-5e0c1a52-6f1d-4c1b-9a3e-2d4f60a1b7c1";
constexpr double kJobGpuUtilization = 0.05;  // scripted: the worker's GPU idles
// The origin: 16 files of 6 MiB behind 2 MiB/s for every connection together. Warming and the
// reader share it, so the reader blocks on nearly every chunk while the test checks (about 45 s
// pass before the dataset is warm).
constexpr int kFiles = 16;
constexpr int64_t kFileBytes = 6 << 20;
constexpr int64_t kOriginBytesPerSecond = 2 << 20;
// The alerts' 5-minute windows shortened to this in Prometheus' copy of the rule file.
constexpr const char* kAlertWindow = "20s";

std::string env(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

// Runs `command` with sh; its exit status (-1 when it did not run) and its output.
std::pair<int, std::string> run(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "cannot run " + command};
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

std::string shellQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string field(const Json& object, const std::string& name) {
  return object.has_string_field(name) ? object.at(name).as_string() : "";
}

double number(const Json& object, const std::string& path) {
  const Json value = kube::pathValue(object, path);
  return value.is_number() ? value.as_double() : std::nan("");
}

// A shell command in a process group of its own, held at its start until released (so that it
// can be moved into a cgroup first); killed with its group when the object goes.
class HeldProcess {
 public:
  explicit HeldProcess(const std::string& command) : command_(command) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    const char* text = command_.c_str();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::close(fds[1]);
      char go = 0;
      if (::read(fds[0], &go, 1) != 1 || go != 'y') ::_exit(126);
      ::execl("/bin/sh", "sh", "-c", text, nullptr);
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
    ::close(fds[0]);
    release_ = fds[1];
  }
  ~HeldProcess() {
    release(false);
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  HeldProcess(const HeldProcess&) = delete;
  HeldProcess& operator=(const HeldProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Whether it has not exited yet.
  bool running() {
    if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = -1;
    return pid_ > 0;
  }
  // Lets the command run (`go`), or makes the process exit at once.
  void release(bool go) {
    if (release_ < 0) return;
    const char c = go ? 'y' : 'n';
    (void)!::write(release_, &c, 1);
    ::close(release_);
    release_ = -1;
  }

 private:
  std::string command_;
  pid_t pid_ = -1;
  int release_ = -1;
};

// A volume published over the CSI node plugin as the kubelet publishes a pod's inline volume;
// unpublished when the object goes.
class CsiPublication {
 public:
  CsiPublication(const std::string& csiAddress, std::filesystem::path target)
      : channel_(grpc::CreateChannel(csiAddress, grpc::InsecureChannelCredentials())),
        target_(std::move(target)) {}
  ~CsiPublication() {
    if (!published_) return;
    grpc::ClientContext context;
    csi::v1::NodeUnpublishVolumeRequest request;
    request.set_volume_id(volumeId_);
    request.set_target_path(target_.string());
    csi::v1::NodeUnpublishVolumeResponse response;
    (void)csi::v1::Node::NewStub(channel_)->NodeUnpublishVolume(&context, request, &response);
  }

  // The pod's volume with these volumeAttributes.
  grpc::Status publish(std::map<std::string, std::string> attributes, const std::string& ns,
                       const std::string& pod, const std::string& uid) {
    volumeId_ = "csi-" + uid + "-" + target_.filename().string();
    csi::v1::NodePublishVolumeRequest request;
    request.set_volume_id(volumeId_);
    request.set_target_path(target_.string());
    request.mutable_volume_capability()->mutable_mount();
    attributes.insert({{"csi.storage.k8s.io/ephemeral", "true"},
                       {"csi.storage.k8s.io/pod.namespace", ns},
                       {"csi.storage.k8s.io/pod.name", pod},
                       {"csi.storage.k8s.io/pod.uid", uid}});
    request.mutable_volume_context()->insert(attributes.begin(), attributes.end());
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    csi::v1::NodePublishVolumeResponse response;
    const grpc::Status status =
        csi::v1::Node::NewStub(channel_)->NodePublishVolume(&context, request, &response);
    published_ = status.ok();
    return status;
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::filesystem::path target_;
  std::string volumeId_;
  bool published_ = false;
};

// One query of queries.json (tests/e2e/telemetry_queries.py) and where it comes from.
std::string whereOf(const Json& q) {
  const std::string kind = field(q, "kind");
  if (kind == "panel") {
    return field(q, "dashboard") + ": panel " + std::to_string(q.at("panelId").as_integer()) +
           " \"" + field(q, "title") + "\" query " + field(q, "refId");
  }
  return field(q, "dashboard") + ": " + kind + " " + field(q, "name");
}

std::string mayBeEmptyReason(const std::string& expr) {
  for (const auto& entry : kMayBeEmpty)
    if (expr.find(entry.part) != std::string::npos) return entry.reason;
  return "";
}

class TelemetryE2eTest : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    if (HasFatalFailure()) return;
    if (!cluster_->isDouble())
      GTEST_SKIP() << "the cache node's pod answers on 127.0.0.1: API-server double only";
    if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
      GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
    prometheus_ = env("GRANARY_PROMETHEUS", "/usr/bin/prometheus");
    promtool_ = env("GRANARY_PROMTOOL", "/usr/bin/promtool");
    for (const auto& binary : {prometheus_, promtool_}) {
      if (::access(binary.c_str(), X_OK) != 0)
        GTEST_SKIP() << binary << " is not installed (Debian: apt-get install prometheus)";
    }
    {  // a process can be put into a pod's cgroup here
      HeldProcess probe("exit 0");
      auto cgroup = PodCgroup::enter(
          "00000000-0000-4000-8000-" + std::to_string(100000000000 + ::getpid()), probe.pid());
      probe.release(false);  // it exits; the cgroup goes with `cgroup`
      if (!cgroup.isOk()) GTEST_SKIP() << cgroup.status();
    }
    suffix_ = ns().substr(ns().rfind('-') + 1);
    nodeName_ = "gpu-node-" + suffix_;
    root_ = std::filesystem::temp_directory_path() / ("granary-e2e-" + suffix_);
    removeTree(root_);
    std::filesystem::create_directories(root_ / "origin");
    std::mt19937_64 random(7);
    for (int i = 0; i < kFiles; ++i) {
      std::string data(kFileBytes, '\0');
      for (size_t at = 0; at + 8 <= data.size(); at += 8) {
        const uint64_t word = random();
        std::memcpy(data.data() + at, &word, 8);
      }
      char name[32];
      std::snprintf(name, sizeof name, "part-%02d.bin", i);
      std::ofstream(root_ / "origin" / name, std::ios::binary) << data;
    }
    auto origin = HttpFileServer::start(root_ / "origin");
    ASSERT_TRUE(origin.isOk()) << origin.status();
    origin_ = std::move(*origin);
    origin_->throttle(kOriginBytesPerSecond);
  }

  void TearDown() override {
    schedulerRunning_.reset();
    scheduler_.reset();
    schedulerPlane_.reset();
    running_.reset();  // the operator stops
    jobs_.reset();
    datasets_.reset();
    plane_.reset();
    prometheusServer_.reset();
    if (node_) node_->kill(SIGTERM);  // unmounts its datasets
    node_.reset();
    kubelet_.reset();
    origin_.reset();
    if (cluster_ != nullptr && cluster_->isDouble() && !nodeName_.empty()) {
      (void)client().remove(resources::pods(), kCacheNodeNamespace, cacheNodePod());
    }
    kubeNode_.reset();
    removeTree(root_);  // and the mounts a killed node left
    ClusterTest::TearDown();
  }

  std::string cacheNodePod() const { return "granary-cache-node-" + suffix_; }
  std::string nodeMetrics() const { return "127.0.0.1:" + std::to_string(node_->metricsPort()); }

  // The Node, the granary-cache-node process on it with GPU telemetry (fake NVML, fake kubelet)
  // and its pod in granary-system, as the chart's DaemonSet makes it.
  void startCacheNode() {
    scenario_.play(std::string("gpu ") + kJobGpu +
                   " NVIDIA_H100_80GB_HBM3 util=5 memutil=2 used=21474836480 total=85899345920 "
                   "power_mw=92000 temp=38 sm_mhz=1980 tx_kbs=1024 rx_kbs=24576 sm_active=4 "
                   "tensor_active=1\n"
                   "gpu GPU-9a7d3e11-2b4c-4f0e-8d6a-51c2e8f3a904 NVIDIA_H100_80GB_HBM3 util=81 "
                   "memutil=45 used=64424509440 total=85899345920 power_mw=512000 temp=67 "
                   "sm_mhz=1755 tx_kbs=8192 rx_kbs=196608 sm_active=74 tensor_active=52\n");
    kubelet_ = std::make_unique<FakeKubelet>(root_ / "kubelet.sock");
    kubeNode_ = std::make_unique<TestNode>(
        client(), nodeName_,
        "status: {allocatable: {cpu: \"64\", memory: 512Gi, pods: \"110\", nvidia.com/gpu: "
        "\"2\"}}");
    ASSERT_TRUE(kubeNode_->status().isOk()) << kubeNode_->status();
    std::filesystem::create_directories(checkpointOrigin().parent_path());
    node_ = std::make_unique<NodeProcess>(root_ / "node", nodeName_);
    std::ofstream(root_ / "node" / "config.yaml", std::ios::app)
        << "gpuTelemetry: true\nnvmlLibrary: " << GRANARY_FAKE_NVML_LIBRARY
        << "\ngpuSampleIntervalMs: 500\npodResourcesSocket: " << (root_ / "kubelet.sock").string()
        << "\ncheckpointOriginRoots: [" << sharedRoot(checkpointOrigin().parent_path()) << "]\n";
    node_->start();
    ASSERT_FALSE(HasFatalFailure());
    auto created =
        client().create(resources::namespaces(), "",
                        yaml(std::string("metadata: {name: ") + kCacheNodeNamespace + "}"));
    ASSERT_TRUE(created.isOk() || created.status().code() == StatusCode::kAlreadyExists)
        << created.status();
    const std::string port = node_->address().substr(node_->address().rfind(':') + 1);
    auto pod = client().create(
        resources::pods(), kCacheNodeNamespace,
        yaml("metadata: {name: " + cacheNodePod() +
             ", labels: {app.kubernetes.io/name: granary-cache-node, app.kubernetes.io/instance: "
             "granary}}\nspec: {nodeName: " +
             nodeName_ +
             ", containers: [{name: cache-node, image: granary, ports: [{name: grpc, "
             "containerPort: " +
             port + "}, {name: metrics, containerPort: " + std::to_string(node_->metricsPort()) +
             "}]}]}"));
    ASSERT_TRUE(pod.isOk()) << pod.status();
    ASSERT_TRUE(client()
                    .mergePatch(resources::pods(), kCacheNodeNamespace, cacheNodePod(),
                                yaml("status: {phase: Running, podIP: 127.0.0.1, conditions: "
                                     "[{type: Ready, status: \"True\"}]}"),
                                "status")
                    .isOk());
  }

  // The operator as granary-operator's main() builds it, in this process: the control plane
  // (kubeconfig, counted client, leader election, /metrics on a free port), the cache-node
  // client with its request counts, the job series, the Dataset and TrainingJob controllers
  // (telemetry every 5 s, the shortest --telemetry-interval the binary takes).
  void startOperator() {
    ASSERT_TRUE(writeKubeconfig(cluster_->restConfig(), ns(), root_ / "kubeconfig").isOk());
    operatorMetrics_ = "127.0.0.1:" + std::to_string(freePort());
    auto plane = kube::ControlPlane::start({.kubeconfig = (root_ / "kubeconfig").string(),
                                            .metricsAddress = operatorMetrics_,
                                            .leaderElect = true,
                                            .leaseNamespace = ns(),
                                            .logLevel = "warn"},
                                           names::kOperator);
    ASSERT_TRUE(plane.isOk()) << plane.status();
    plane_ = std::move(*plane);
    auto requests = op::declareCacheNodeRequests(plane_->registry());
    ASSERT_TRUE(requests.isOk()) << requests.status();
    auto series = op::declareJobSeries(plane_->registry());
    ASSERT_TRUE(series.isOk()) << series.status();
    cacheNodes_ = std::make_unique<op::CacheNodeClient>(
        op::CacheNodeClientOptions{.token = Secret(kToken), .requests = *requests});
    datasets_ = std::make_unique<op::DatasetController>(
        plane_->manager(), *cacheNodes_, names::kCacheNodeSelector,
        op::DatasetControllerOptions{.pollWarming = 1s,
                                     .pollReady = 5s,
                                     .ns = ns(),
                                     .cacheNodeNamespace = kCacheNodeNamespace});
    jobs_ = std::make_unique<op::TrainingJobController>(
        plane_->manager(),
        op::TrainingJobControllerOptions{.ns = ns(),
                                         .cacheNodeNamespace = kCacheNodeNamespace,
                                         .cacheNodes = cacheNodes_.get(),
                                         .telemetryInterval = 5s,
                                         .series = *series});
    running_ = std::make_unique<Running>(
        [this](std::stop_token stop) { (void)plane_->run(std::move(stop)); });
  }

  // granary-scheduler as its main() builds it, in this process (leader election, /metrics on a
  // free port): it places and binds the TrainingJob's worker.
  void startScheduler() {
    schedulerMetrics_ = "127.0.0.1:" + std::to_string(freePort());
    auto plane = kube::ControlPlane::start({.kubeconfig = (root_ / "kubeconfig").string(),
                                            .metricsAddress = schedulerMetrics_,
                                            .leaderElect = true,
                                            .leaseNamespace = ns(),
                                            .logLevel = "warn"},
                                           names::kScheduler);
    ASSERT_TRUE(plane.isOk()) << plane.status();
    schedulerPlane_ = std::move(*plane);
    auto scheduler =
        scheduler::Scheduler::create(schedulerPlane_->manager(), {}, schedulerPlane_->registry());
    ASSERT_TRUE(scheduler.isOk()) << scheduler.status();
    scheduler_ = std::move(*scheduler);
    schedulerRunning_ = std::make_unique<Running>(
        [this](std::stop_token stop) { (void)schedulerPlane_->run(std::move(stop)); });
  }

  // Prometheus scraping the cache node and the operator as the chart's monitors would, with the
  // fast copy of the alerts; queries_ from the dashboards and the rule file as they are now.
  void startPrometheus() {
    std::filesystem::create_directories(root_ / "prometheus");
    std::string command =
        std::string(GRANARY_SYSTEM_PYTHON) + " " +
        shellQuoted(std::string(GRANARY_SOURCE_DIR) + "/tests/e2e/telemetry_queries.py") +
        " --root " + shellQuoted(GRANARY_SOURCE_DIR) + " --helm " + shellQuoted(GRANARY_HELM) +
        " --out " + shellQuoted((root_ / "prometheus").string()) + " --alert-window " +
        kAlertWindow;
    command += " --target " + shellQuoted("granary-cache-node=" + nodeMetrics() + "," +
                                          kCacheNodeNamespace + "," + cacheNodePod());
    command +=
        " --target " + shellQuoted("granary-operator=" + operatorMetrics_ + "," +
                                   kCacheNodeNamespace + ",granary-operator-7c9f8d6b5-x2x4q");
    command +=
        " --target " + shellQuoted("granary-scheduler=" + schedulerMetrics_ + "," +
                                   kCacheNodeNamespace + ",granary-scheduler-5d8b7c6f9-k7m2p");
    for (const auto& [name, value] : variables())
      command += " --var " + shellQuoted(name + "=" + value);
    const auto [exit, output] = run(command);
    ASSERT_EQ(exit, 0) << command << "\n" << output;
    std::ifstream in(root_ / "prometheus" / "queries.json");
    std::stringstream text;
    text << in.rdbuf();
    queries_ = Json::parse(text.str());
    auto server = PrometheusServer::start(prometheus_, root_ / "prometheus" / "prometheus.yml",
                                          root_ / "prometheus");
    ASSERT_TRUE(server.isOk()) << server.status();
    prometheusServer_ = std::move(*server);
  }

  // Grafana's variables as a user looking at this test's objects would set them.
  std::map<std::string, std::string> variables() const {
    return {{"namespace", ns()},
            {"job", kJob},
            {"dataset", ns() + "/" + kDataset},
            {"instance", nodeMetrics()},
            {"node", nodeName_},
            {"Hostname", nodeName_},
            {"pod", kWorker},
            {"controller", "dataset|trainingjob"}};
  }

  Json job() {
    auto got = client().get(resources::trainingJobs(), ns(), kJob);
    return got.isOk() ? *got : Json();
  }
  // The TrainingJob's checkpoint origin (file://, within the cache node's checkpointOriginRoots).
  std::filesystem::path checkpointOrigin() const { return root_ / "checkpoints" / kJob; }
  bool hasEvent(const std::string& reason) {
    auto listed = client().list(resources::events(), ns());
    if (!listed.isOk()) return false;
    for (const auto& e : listed->items)
      if (e.has_string_field("reason") && e.at("reason").as_string() == reason) return true;
    return false;
  }

  // `promtool check metrics` of an endpoint's /metrics; "" when it passes, but for its lint of the
  // label names in kDcgmLabels when those are the only ones not in snake_case.
  std::string promtoolProblems(const std::string& address, const std::string& name) {
    std::string body;
    const long code = httpGet("http://" + address + "/metrics", body);
    if (code != 200) return name + ": /metrics answered " + std::to_string(code);
    const auto file = root_ / (name + ".metrics.txt");
    std::ofstream(file) << body;
    const auto [exit, output] =
        run(shellQuoted(promtool_) + " check metrics < " + shellQuoted(file.string()));
    if (exit == 0) return "";
    std::set<std::string> notSnakeCase;
    static const std::regex kLabelName(R"([{,]([A-Za-z_][A-Za-z0-9_]*)=")");
    static const std::regex kSnakeCase("[a-z_][a-z0-9_]*");
    for (std::sregex_iterator it(body.begin(), body.end(), kLabelName), end; it != end; ++it)
      if (!std::regex_match((*it)[1].str(), kSnakeCase)) notSnakeCase.insert((*it)[1].str());
    const bool onlyDcgm = std::includes(kDcgmLabels.begin(), kDcgmLabels.end(),
                                        notSnakeCase.begin(), notSnakeCase.end());
    std::string left;
    std::stringstream lines(output);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && !(onlyDcgm && line.find(kCamelCaseLint) != std::string::npos))
        left += line + "\n";
    if (left.empty()) {
      std::cout << name << ": promtool check metrics passes but for its lint of dcgm-exporter's "
                << "label words (UUID, modelName, Hostname)\n";
      return "";
    }
    return name + ": promtool check metrics:\n" + left;
  }

  // What checkQueries() found.
  struct QueryReport {
    int checked = 0;
    std::vector<std::string> failures;    // one paragraph each
    std::vector<std::string> letOff;      // empty panel expressions kMayBeEmpty allows
    std::vector<std::string> undeclared;  // empty ones using a metric no binary declares yet
                                          // (ctest dashboards.static fails on those)
    std::vector<std::string> nanOnly;     // series, but every value NaN (Grafana: no value)
  };

  // Checks every query against Prometheus now.
  QueryReport checkQueries() {
    QueryReport report;
    std::vector<std::string>& failures = report.failures;
    for (const auto& q : queries_.as_array()) {
      const std::string kind = field(q, "kind");
      if (kind == "row") continue;
      ++report.checked;
      const std::string where = whereOf(q);
      const std::string expr = field(q, "expr"), query = field(q, "query");
      const auto fail = [&](const std::string& problem) {
        failures.push_back(where + "\n    expr:  " + query + "\n    " + problem);
      };
      if (q.has_array_field("missing") && q.at("missing").size() > 0) {
        std::string names;
        for (const auto& m : q.at("missing").as_array()) names += " $" + m.as_string();
        fail("uses Grafana variables this test gives no value:" + names);
        continue;
      }
      auto data = prometheusServer_->query(query);
      if (!data.isOk()) {
        fail("Prometheus refuses it: " + data.status().message());
        continue;
      }
      const size_t series = seriesCount(*data);
      if (kind == "variable") {
        const std::string label = field(q, "label"), expected = field(q, "expected");
        if (label.empty() || expected.empty()) continue;
        std::set<std::string> offered;
        const std::string regex = field(q, "regex");
        for (const auto& r : data->at("result").as_array()) {
          const std::string value = field(r.at("metric"), label);
          std::smatch m;
          if (regex.empty()) {
            if (!value.empty()) offered.insert(value);
          } else if (std::regex_search(value, m, std::regex(regex))) {
            offered.insert(m.size() > 1 ? m[1].str() : value);
          }
        }
        std::string offeredText;
        for (const auto& o : offered) offeredText += " " + o;
        std::stringstream alternatives(expected);
        for (std::string one; std::getline(alternatives, one, '|');)
          if (!offered.count(one))
            fail("the variable does not offer \"" + one + "\"; it offers:" + offeredText);
      } else if (kind == "panel" && series == 0) {
        std::string names;
        if (q.has_array_field("undeclared"))
          for (const auto& m : q.at("undeclared").as_array()) names += " " + m.as_string();
        const std::string reason = mayBeEmptyReason(expr);
        if (!reason.empty())
          report.letOff.push_back(where + " (" + reason + ")");
        else if (!names.empty())
          report.undeclared.push_back(where + ":" + names);
        else
          fail("returns no series");
      } else if (kind == "panel" && field(*data, "resultType") == "vector") {
        bool allNan = true;
        for (const auto& r : data->at("result").as_array())
          allNan = allNan && r.at("value").at(1).as_string() == "NaN";
        if (allNan) report.nanOnly.push_back(where);
      }
    }
    return report;
  }

  // Into `dir`: each panel's queries over [from, now] (<dashboard>/panel-<id>.json), the rows
  // (<dashboard>/rows.json) and the variables' values (variables.json).
  void savePictures(const std::string& dir, std::chrono::system_clock::time_point from) {
    const auto to = std::chrono::system_clock::now();
    std::filesystem::create_directories(dir);
    Json values = Json::object();
    for (const auto& [name, value] : variables()) values[name] = Json::string(value);
    std::ofstream(std::filesystem::path(dir) / "variables.json") << values.serialize();
    std::map<std::string, Json> panels, rows;
    for (const auto& q : queries_.as_array()) {
      const std::string kind = field(q, "kind");
      const std::string dashboard = field(q, "dashboard");
      if (kind == "row") {
        Json& list = rows[dashboard];
        if (list.is_null()) list = Json::array();
        list[list.size()] = q;
      }
      if (kind != "panel") continue;
      const std::string key = dashboard + "/" + std::to_string(q.at("panelId").as_integer());
      Json& panel = panels[key];
      if (panel.is_null()) {
        panel = q;
        panel["targets"] = Json::array();
        panel["start"] =
            Json::number(std::chrono::duration<double>(from.time_since_epoch()).count());
        panel["end"] = Json::number(std::chrono::duration<double>(to.time_since_epoch()).count());
      }
      Json target = Json::object();
      for (const char* name : {"refId", "expr", "query", "legendFormat"}) target[name] = q.at(name);
      auto data = prometheusServer_->queryRange(field(q, "query"), from, to, 1s);
      target["result"] = data.isOk() ? data->at("result") : Json::array();
      Json& targets = panel["targets"];
      targets[targets.size()] = target;
    }
    for (const auto& [key, panel] : panels) {
      const auto path = std::filesystem::path(dir) /
                        std::filesystem::path(key).parent_path().stem() /
                        ("panel-" + std::filesystem::path(key).filename().string() + ".json");
      std::filesystem::create_directories(path.parent_path());
      std::ofstream(path) << panel.serialize();
    }
    for (const auto& [dashboard, list] : rows) {
      const auto path =
          std::filesystem::path(dir) / std::filesystem::path(dashboard).stem() / "rows.json";
      std::filesystem::create_directories(path.parent_path());
      std::ofstream(path) << list.serialize();
    }
    std::cout << "dashboard panels' data over the run saved under " << dir << "\n";
  }

  std::string prometheus_, promtool_;
  std::string suffix_, nodeName_;
  std::unique_ptr<TestNode> kubeNode_;  // the Node, kept Ready as a kubelet would
  std::filesystem::path root_;
  FakeNvmlScenario scenario_;  // the cache node inherits its variable
  std::unique_ptr<HttpFileServer> origin_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<NodeProcess> node_;
  std::string operatorMetrics_;
  std::unique_ptr<kube::ControlPlane> plane_;
  std::unique_ptr<op::CacheNodeClient> cacheNodes_;
  std::unique_ptr<op::DatasetController> datasets_;
  std::unique_ptr<op::TrainingJobController> jobs_;
  std::unique_ptr<Running> running_;
  std::string schedulerMetrics_;
  std::unique_ptr<kube::ControlPlane> schedulerPlane_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<Running> schedulerRunning_;
  std::unique_ptr<PrometheusServer> prometheusServer_;
  Json queries_;
};

TEST_F(TelemetryE2eTest, AStarvedWorkerShowsInStatusMetricsDashboardsAndAlerts) {
  startCacheNode();
  ASSERT_FALSE(HasFatalFailure());
  startOperator();
  ASSERT_FALSE(HasFatalFailure());
  startScheduler();
  ASSERT_FALSE(HasFatalFailure());
  startPrometheus();
  ASSERT_FALSE(HasFatalFailure());
  const auto scraped = std::chrono::system_clock::now();

  // A Dataset warmed for its jobs, and a TrainingJob of one worker with one GPU reading it.
  ASSERT_TRUE(client()
                  .create(resources::datasets(), ns(),
                          yaml(std::string("apiVersion: granary.io/v1alpha1\nkind: Dataset\n"
                                           "metadata: {name: ") +
                               kDataset + "}\nspec:\n  source: {uri: \"" + origin_->url() +
                               "\"}\n  cache: {chunkSize: 1Mi, warm: OnJob}\n"))
                  .isOk());
  ASSERT_TRUE(client()
                  .create(resources::trainingJobs(), ns(),
                          yaml(std::string("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\n"
                                           "metadata: {name: ") +
                               kJob +
                               "}\nspec:\n  workers: 1\n  gpusPerWorker: 1\n  datasets: "
                               "[{name: " +
                               kDataset + ", mountPath: /data}]\n  checkpoints: {uri: \"file://" +
                               checkpointOrigin().string() +
                               "\", mountPath: /ckpt}\n  template: {spec: {containers: [{name: "
                               "trainer, image: pytorch}]}}"))
                  .isOk());
  Json worker;
  ASSERT_TRUE(eventually(
      [&] {
        auto got = client().get(resources::pods(), ns(), kWorker);
        if (got.isOk()) worker = *got;
        return got.isOk();
      },
      20s))
      << "the operator creates the worker: " << job().serialize();
  const std::string uid = kube::uidOf(worker);
  // What an API server does every few minutes, in a moment: it ends the operator's watches,
  // which resume, and it has compacted its history, so that they list again (the Watches
  // panel's two series).
  cluster_->forgetHistory();
  cluster_->dropWatches();
  // granary-scheduler binds the worker to the cache node's Node; the kubelet's part: it runs,
  // holds the first GPU, and its volume is published.
  ASSERT_TRUE(eventually(
      [&] {
        auto got = client().get(resources::pods(), ns(), kWorker);
        return got.isOk() && kube::pathValue(*got, "spec.nodeName").is_string() &&
               kube::pathValue(*got, "spec.nodeName").as_string() == nodeName_;
      },
      30s))
      << "granary-scheduler binds the worker to " << nodeName_ << "; the worker: " <<
      [&] {
        auto got = client().get(resources::pods(), ns(), kWorker);
        return got.isOk() ? got->serialize() : got.status().message();
      }()
      << "\nevents: " << [&] {
           auto listed = client().list(resources::events(), ns());
           std::string out;
           if (listed.isOk())
             for (const auto& e : listed->items) out += "\n  " + e.serialize();
           return out;
         }();
  ASSERT_TRUE(client()
                  .mergePatch(resources::pods(), ns(), kWorker,
                              yaml("status: {phase: Running, conditions: [{type: Ready, status: "
                                   "\"True\"}]}"),
                              "status")
                  .isOk());
  kubelet_->setPods(
      {{.podNamespace = ns(), .podName = kWorker, .container = "trainer", .deviceIds = {kJobGpu}}});
  const auto target = root_ / "kubelet" / "pods" / uid / "volumes" / "data";
  CsiPublication publication(node_->csiAddress(), target);
  grpc::Status published;
  ASSERT_TRUE(eventually(
      [&] {
        published = publication.publish({{"dataset", kDataset}}, ns(), kWorker, uid);
        return published.ok();  // once the dataset is there
      },
      30s, 200ms))
      << "CSI publish: " << published.error_message() << "\n"
      << node_->log();

  // Its checkpoint volume, as the operator gave it to the pod, published by the kubelet; the
  // worker saves a checkpoint there.
  std::map<std::string, std::string> checkpointAttributes;
  const Json volumes = kube::pathValue(worker, "spec.volumes");
  for (const auto& volume : volumes.as_array())
    if (volume.at("name").as_string() == "granary-checkpoints")
      for (const auto& [key, value] : volume.at("csi").at("volumeAttributes").as_object())
        checkpointAttributes[key] = value.as_string();
  const auto checkpoints = root_ / "kubelet" / "pods" / uid / "volumes" / "ckpt";
  CsiPublication checkpointVolume(node_->csiAddress(), checkpoints);
  published = checkpointVolume.publish(checkpointAttributes, ns(), kWorker, uid);
  ASSERT_TRUE(published.ok()) << published.error_message() << "\n" << node_->log();
  std::filesystem::create_directories(checkpoints / "step-1");
  std::ofstream(checkpoints / "step-1" / "__0_0.distcp") << std::string(1 << 20, 'w');
  std::ofstream(checkpoints / "step-1" / ".metadata") << "step 1";

  // The worker's data loader: reads the files from the last one back (warming goes from the
  // first one on), in the pod's cgroup.
  std::unique_ptr<PodCgroup> cgroup;
  HeldProcess reader("cd " + shellQuoted(target.string()) +
                     " && for f in $(ls -r); do cat \"$f\"; done > /dev/null");
  auto entered = PodCgroup::enter(uid, reader.pid());
  ASSERT_TRUE(entered.isOk()) << entered.status();
  cgroup = std::move(*entered);
  reader.release(true);

  // The job's status: its GPU idles (the scripted 5%) while its reader waits: data-starved.
  Json status;
  const bool starved = eventually(
      [&] {
        status = kube::pathValue(job(), "status");
        return std::abs(number(status, "gpu.utilization") - kJobGpuUtilization) <= 0.01 &&
               number(status, "gpu.dataStarvedFraction") > 0 &&
               number(status, "data.waitFraction") > 0;
      },
      45s);
  EXPECT_TRUE(starved) << "status.gpu.utilization ≈ " << kJobGpuUtilization
                       << ", status.gpu.dataStarvedFraction > 0 and status.data.waitFraction > 0;"
                       << " the status: " << status.serialize();
  std::cout << "TrainingJob status: gpu " << kube::pathValue(status, "gpu").serialize() << ", data "
            << kube::pathValue(status, "data").serialize() << "\n";

  // Its checkpoint, drained to the origin: the status says so, and an Event.
  const bool drained = eventually(
      [&] {
        status = kube::pathValue(job(), "status");
        const Json newest = kube::pathValue(status, "checkpoints.newestAtOrigin");
        return newest.is_string() && newest.as_string() == "step-1";
      },
      30s);
  EXPECT_TRUE(drained) << "status.checkpoints.newestAtOrigin is step-1; the status: "
                       << status.serialize();
  EXPECT_EQ(kube::pathValue(status, "checkpoints.items").at(0).at("nodes").at(0).as_string(),
            nodeName_);
  EXPECT_EQ(std::filesystem::file_size(checkpointOrigin() / "step-1" / "__0_0.distcp"), 1u << 20);
  EXPECT_TRUE(eventually([&] { return hasEvent("CheckpointAtOrigin"); }, 10s))
      << "an Event says the checkpoint reached the origin";
  // On each sample the operator tells the volume's node where to copy its files (nowhere: the
  // job has one node) and which of the job's nodes are lost (none).
  const bool peersSet = eventually(
      [&] {
        auto got = prometheusServer_->query(
            "granary_operator_cache_node_requests_total{method=\"SetCheckpointPeers\",code="
            "\"ok\"}");
        return got.isOk() && seriesCount(*got) > 0 &&
               std::stod(got->at("result").at(0).at("value").at(1).as_string()) > 0;
      },
      20s);
  EXPECT_TRUE(peersSet) << "the operator's SetCheckpointPeers calls succeed";
  std::cout << "TrainingJob status: checkpoints "
            << kube::pathValue(status, "checkpoints").serialize() << "\n";

  // The data-starved alerts fire for the worker (Prometheus' copy: for 0s, 20 s windows).
  const auto firingFor = [&](const Json& alerts, const std::string& name) {
    for (const auto& a : alerts.at("alerts").as_array()) {
      if (field(a, "state") != "firing" || field(a.at("labels"), "alertname") != name) continue;
      for (const auto& [label, value] : a.at("labels").as_object()) {
        if (value.is_string() &&
            (value.as_string() == kWorker || value.as_string() == ns() + "/" + kWorker))
          return true;
      }
    }
    return false;
  };
  Json alerts;
  const bool fired = eventually(
      [&] {
        auto got = prometheusServer_->get("/api/v1/alerts");
        if (got.isOk()) alerts = *got;
        return got.isOk() && firingFor(alerts, "GranaryPodDataStarved") &&
               firingFor(alerts, "GranaryJobStarvedForData");
      },
      60s, 250ms);
  EXPECT_TRUE(firingFor(alerts, "GranaryPodDataStarved"))
      << "GranaryPodDataStarved fires for " << ns() << "/" << kWorker
      << "; alerts: " << alerts.serialize();
  EXPECT_TRUE(firingFor(alerts, "GranaryJobStarvedForData"))
      << "GranaryJobStarvedForData fires for " << ns() << "/" << kWorker
      << "; alerts: " << alerts.serialize();
  (void)fired;
  // What the node measured meanwhile (one reader, one pod here): the share of time its reads were
  // blocked, and of time judged data-starved, over the last 10 s.
  for (const char* expr : {"max(rate(granary_dataset_read_wait_seconds_total[10s]))",
                           "max(rate(granary_pod_data_starved_seconds_total[10s]))"}) {
    auto got = prometheusServer_->query(expr);
    std::cout << expr << " = "
              << (got.isOk() && seriesCount(*got) > 0
                      ? got->at("result").at(0).at("value").at(1).as_string()
                      : std::string("none"))
              << "\n";
  }
  std::set<std::string> firing;
  for (const auto& a : alerts.at("alerts").as_array())
    if (field(a, "state") == "firing") firing.insert(field(a.at("labels"), "alertname"));
  std::cout << "alerts firing:";
  for (const auto& name : firing) std::cout << " " << name;
  std::cout << "\n";

  // Both endpoints as Prometheus reads them.
  EXPECT_EQ(promtoolProblems(nodeMetrics(), "cache-node"), "");
  EXPECT_EQ(promtoolProblems(operatorMetrics_, "operator"), "");
  EXPECT_EQ(promtoolProblems(schedulerMetrics_, "scheduler"), "");

  // Every dashboard and alert expression, against what Prometheus scraped.
  const QueryReport report = checkQueries();
  std::string failures;
  for (const auto& f : report.failures) failures += "\n  " + f;
  EXPECT_TRUE(report.failures.empty()) << report.failures.size() << " of " << report.checked
                                       << " dashboard and alert expressions fail:" << failures;
  std::cout << report.checked << " expressions checked, " << report.failures.size() << " failed, "
            << report.letOff.size() << " empty as kMayBeEmpty allows:\n";
  for (const auto& l : report.letOff) std::cout << "  " << l << "\n";
  if (!report.undeclared.empty()) {
    std::cout << report.undeclared.size() << " empty because no binary declares their metrics "
              << "yet (ctest dashboards.static fails on those):\n";
    for (const auto& u : report.undeclared) std::cout << "  " << u << "\n";
  }
  if (!report.nanOnly.empty()) {
    std::cout << report.nanOnly.size() << " with series whose every value is NaN now:\n";
    for (const auto& n : report.nanOnly) std::cout << "  " << n << "\n";
  }

  // For the pictures the run goes on until the reader has read everything (the dataset is warm
  // by then, from both ends) and 20 s more, so that the panels show the whole story.
  if (const std::string pictures = env("GRANARY_DASHBOARD_PICTURES", ""); !pictures.empty()) {
    eventually([&] { return !reader.running(); }, 120s);
    std::this_thread::sleep_for(20s);
    savePictures(pictures, scraped);
  }
}

}  // namespace
}  // namespace granary::testing
