// The TrainingJob controller against the API-server double (or a real cluster through
// GRANARY_TEST_KUBECONFIG). The test plays the kubelet (pod phases and exit codes, evictions),
// the Dataset controller (a Dataset's status) and, for deadlines, time (a FakeClock given to the
// controller, with a change to the job to have it look again).
#include "operator/training_job_controller.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <mutex>

#include "common/api/training_job.h"
#include "common/kube/manager.h"
#include "common/names.h"
#include "common/origin_roots.h"
#include "operator/core/conditions.h"
#include "tests/support/api_server_rules.h"
#include "tests/support/cluster.h"
#include "tests/support/fake_clock.h"
#include "tests/support/rbac_check.h"

namespace granary::testing {
namespace {

using kube::Json;
namespace resources = kube::resources;
using namespace std::chrono_literals;

class TrainingJobControllerTest : public ClusterTest {
 protected:
  void TearDown() override {
    running_.reset();
    manager_.reset();
    operatorClient_.reset();
    EXPECT_EQ(rbac_.notGranted(), std::vector<std::string>{})
        << "the chart must grant granary-operator every request it made";
    ClusterTest::TearDown();
  }

  // With `series`, the granary_job_* series are declared in registry_ and published.
  void startOperator(Clock& clock = realClock(), bool series = false) {
    auto operatorClient = kube::Client::create(
        cluster_->restConfig(),
        {.onResponse = [this, record = rbac_.recorder()](const std::string& method,
                                                         const std::string& path, int code) {
          record(method, path, code);
          if (method == "GET") return;
          std::lock_guard lock(writesMutex_);
          writes_.push_back(method + " " + path + " " + std::to_string(code));
        }});
    ASSERT_TRUE(operatorClient.isOk()) << operatorClient.status();
    operatorClient_ = std::move(*operatorClient);
    auto manager = kube::Manager::create(*operatorClient_, {.metricsAddress = ""}, registry_);
    ASSERT_TRUE(manager.isOk()) << manager.status();
    manager_ = std::move(*manager);
    op::TrainingJobControllerOptions options;
    options.tellRendezvous = [this](const std::string& address, const std::string& notice,
                                    const std::string& token) {
      std::lock_guard lock(writesMutex_);
      notices_.push_back(address + " " + notice);
      noticeTokens_.push_back(token);
      return Status::ok();
    };
    options.checkpointRoots = checkpointRoots_;
    if (series) {
      auto declared = op::declareJobSeries(registry_);
      ASSERT_TRUE(declared.isOk()) << declared.status();
      options.series = *declared;
    }
    controller_ = std::make_unique<op::TrainingJobController>(*manager_, options, clock);
    running_ =
        std::make_unique<Running>([this](std::stop_token stop) { (void)manager_->run(stop); });
  }

  // The first container's mounts of csi.granary.io volumes, in order, each with its volume.
  static std::vector<std::pair<Json, Json>> granaryMounts(const Json& pod) {
    std::map<std::string, Json> volumes;
    const Json declared = kube::pathValue(pod, "spec.volumes");  // held: the loops borrow
    for (const auto& v : declared.as_array()) volumes[v.at("name").as_string()] = v;
    std::vector<std::pair<Json, Json>> out;
    const Json mounts = kube::pathValue(pod, "spec.containers").at(0).at("volumeMounts");
    for (const auto& m : mounts.as_array()) {
      const auto volume = volumes.find(m.at("name").as_string());
      if (volume != volumes.end() &&
          kube::pathValue(volume->second, "csi.driver") == Json::string(names::kCsiDriver))
        out.emplace_back(m, volume->second);
    }
    return out;
  }

  void readyDataset(const std::string& name) {
    ASSERT_TRUE(
        client()
            .create(resources::datasets(), ns(),
                    yaml("apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: " +
                         name + "}\nspec: {source: {uri: \"s3://bucket/" + name + "/\"}}"))
            .isOk());
    ASSERT_TRUE(client()
                    .mergePatch(resources::datasets(), ns(), name,
                                yaml("status: {phase: Ready, totalBytes: 1000, nodes: [{name: n1, "
                                     "cachedBytes: 1000}]}"),
                                "status")
                    .isOk());
  }

  void createJob(const std::string& runPolicy = "{}", int workers = 2,
                 const std::string& warmPolicy = "Parallel") {
    auto created = client().create(
        resources::trainingJobs(), ns(),
        yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: bert}\n"
             "spec:\n  workers: " +
             std::to_string(workers) +
             "\n  gpusPerWorker: 4\n  datasets: [{name: wiki, mountPath: /data}]\n"
             "  warmPolicy: " +
             warmPolicy + "\n  runPolicy: " + runPolicy +
             "\n  template: {spec: {containers: [{name: trainer, image: pytorch, env: [{name: "
             "EPOCHS, value: \"3\"}]}]}}"));
    ASSERT_TRUE(created.isOk()) << created.status();
  }

  // An elastic job "bert" of `workers` reading dataset wiki, going on while `minWorkers` run.
  void createElasticJob(int workers, int minWorkers) {
    auto created = client().create(
        resources::trainingJobs(), ns(),
        yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: bert}\n"
             "spec:\n  workers: " +
             std::to_string(workers) + "\n  elastic: {minWorkers: " + std::to_string(minWorkers) +
             "}\n  gpusPerWorker: 0\n  datasets: [{name: wiki, mountPath: /data}]\n"
             "  template: {spec: {containers: [{name: trainer, image: pytorch}]}}"));
    ASSERT_TRUE(created.isOk()) << created.status();
  }

  Json job() {
    auto got = client().get(resources::trainingJobs(), ns(), "bert");
    return got.isOk() ? *got : Json();
  }
  std::string jobPhase() {
    const Json p = kube::pathValue(job(), "status.phase");
    return p.is_string() ? p.as_string() : "";
  }
  std::vector<Json> workers() {
    auto listed =
        client().list(resources::pods(), ns(), {.labelSelector = "granary.io/job-name=bert"});
    std::vector<Json> out;
    if (listed.isOk())
      for (auto& p : listed->items)
        if (kube::pathValue(p, "metadata.deletionTimestamp").is_null()) out.push_back(p);
    return out;
  }
  // A change to the job (an annotation), so that the controller reconciles it again: how a test
  // that moved the FakeClock has the controller look at the new time.
  Status touch() {
    static int touches = 0;
    return client()
        .mergePatch(
            resources::trainingJobs(), ns(), "bert",
            yaml("metadata: {annotations: {test/touch: \"" + std::to_string(++touches) + "\"}}"))
        .status();
  }
  void touchJob() { ASSERT_TRUE(touch().isOk()); }
  bool jobGone() {
    return client().get(resources::trainingJobs(), ns(), "bert").status().code() ==
           StatusCode::kNotFound;
  }
  // Every worker of the current attempt bound and running, and the job Running.
  void runAll() {
    ASSERT_TRUE(eventually([&] { return workers().size() == 2; }, 20s));
    for (const auto& pod : workers()) setPhase(kube::nameOf(pod), "Running");
    ASSERT_TRUE(eventually([&] { return jobPhase() == "Running"; }, 20s)) << job().serialize();
  }
  // Whether a pod named `name` exists that is not the one of uid `uid`: created again.
  bool recreated(const std::string& name, const std::string& uid) {
    for (const auto& pod : workers())
      if (kube::nameOf(pod) == name && kube::uidOf(pod) != uid) return true;
    return false;
  }
  std::string attemptOf(const Json& pod) { return kube::stringMap(pod).at("granary.io/attempt"); }
  // Sets a worker's phase as the kubelet would (with an exit code for terminated ones).
  void setPhase(const std::string& pod, const std::string& phase, int exitCode = 0) {
    std::string status = "status: {phase: " + phase;
    if (phase == "Running") status += ", conditions: [{type: Ready, status: \"True\"}]";
    if (phase == "Succeeded" || phase == "Failed")
      status += ", containerStatuses: [{name: trainer, state: {terminated: {exitCode: " +
                std::to_string(exitCode) + "}}}]";
    status += "}";
    ASSERT_TRUE(client().mergePatch(resources::pods(), ns(), pod, yaml(status), "status").isOk());
  }
  // Events are written after the status they explain, so an observer of the status waits.
  bool hasEvent(const std::string& reason) {
    return eventually(
        [&] {
          auto listed = client().list(resources::events(), ns());
          if (!listed.isOk()) return false;
          for (const auto& e : listed->items)
            if (e.at("reason").as_string() == reason) return true;
          return false;
        },
        10s);
  }
  static std::string env(const Json& container, const std::string& name) {
    for (const auto& e : container.at("env").as_array())
      if (e.at("name").as_string() == name) return e.at("value").as_string();
    return "<unset>";
  }

  // The operator's requests other than GET with their answers ("POST /api/v1/namespaces/x/pods
  // 201"), in order.
  std::vector<std::string> writes() {
    std::lock_guard lock(writesMutex_);
    return writes_;
  }
  void clearWrites() {
    std::lock_guard lock(writesMutex_);
    writes_.clear();
  }

  // What the operator told rendezvous stores: "<address> <notice>", in order.
  std::vector<std::string> notices() {
    std::lock_guard lock(writesMutex_);
    return notices_;
  }

  // A job `name` whose checkpoints go to `uri`, reading dataset wiki.
  void createCheckpointingJob(const std::string& name, const std::string& uri) {
    auto created = client().create(
        resources::trainingJobs(), ns(),
        yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: " + name +
             "}\nspec:\n  workers: 1\n  gpusPerWorker: 0\n"
             "  datasets: [{name: wiki, mountPath: /data}]\n"
             "  checkpoints: {uri: '" +
             uri +
             "', mountPath: /ckpt}\n"
             "  template: {spec: {containers: [{name: trainer, image: pytorch}]}}"));
    ASSERT_TRUE(created.isOk()) << created.status();
  }
  op::Condition conditionOfJob(const std::string& name, const std::string& type) {
    auto got = client().get(resources::trainingJobs(), ns(), name);
    return got.isOk() ? op::conditionOf(kube::pathValue(*got, "status"), type) : op::Condition{};
  }
  // The Warning Events of reason `reason` about TrainingJob `name`, their messages.
  std::vector<std::string> warnings(const std::string& name, const std::string& reason) {
    std::vector<std::string> out;
    auto listed = client().list(resources::events(), ns());
    if (!listed.isOk()) return out;
    for (const auto& e : listed->items)
      if (e.at("reason").as_string() == reason && e.at("type").as_string() == "Warning" &&
          kube::pathValue(e, "involvedObject.name").as_string() == name)
        out.push_back(e.at("message").as_string());
    return out;
  }

  FakeClock clock_;
  std::mutex writesMutex_;
  std::vector<std::string> writes_;
  std::vector<std::string> notices_;
  std::vector<std::string> noticeTokens_;
  std::optional<std::vector<OriginRoot>> checkpointRoots_;  // the operator's, when set
  RbacCheck rbac_{"granary-operator"};
  std::unique_ptr<kube::Client> operatorClient_;
  MetricsRegistry registry_;
  std::unique_ptr<kube::Manager> manager_;
  std::unique_ptr<op::TrainingJobController> controller_;
  std::unique_ptr<Running> running_;
};

TEST_F(TrainingJobControllerTest, CreatesTheGangTracksItAndSucceeds) {
  readyDataset("wiki");
  createJob();
  startOperator();
  ASSERT_TRUE(eventually([&] { return workers().size() == 2; }, 20s));
  for (const auto& pod : workers()) {
    const int rank = std::stoi(kube::stringMap(pod).at("granary.io/rank"));
    EXPECT_EQ(kube::nameOf(pod), "bert-worker-" + std::to_string(rank));
    EXPECT_EQ(kube::pathValue(pod, "spec.schedulerName").as_string(), "granary-scheduler");
    EXPECT_EQ(kube::pathValue(pod, "spec.restartPolicy").as_string(), "Never");
    EXPECT_EQ(kube::pathValue(pod, "spec.subdomain").as_string(), "bert");
    EXPECT_EQ(kube::pathValue(pod, "metadata.ownerReferences").at(0).at("uid").as_string(),
              kube::uidOf(job()));
    const Json trainer = kube::pathValue(pod, "spec.containers").at(0);
    EXPECT_EQ(env(trainer, "RANK"), std::to_string(rank));
    EXPECT_EQ(env(trainer, "WORLD_SIZE"), "2");
    EXPECT_EQ(env(trainer, "MASTER_ADDR"), "bert-worker-0.bert." + ns() + ".svc");
    EXPECT_EQ(env(trainer, "MASTER_PORT"), "29500");
    EXPECT_EQ(env(trainer, "PET_NPROC_PER_NODE"), "4");
    EXPECT_EQ(env(trainer, "EPOCHS"), "3") << "the template's own environment stays";
    EXPECT_EQ(kube::pathValue(trainer, "resources.limits").at("nvidia.com/gpu").as_string(), "4");
    EXPECT_EQ(kube::pathValue(trainer, "volumeMounts").at(0).at("mountPath").as_string(), "/data");
    const Json volume = kube::pathValue(pod, "spec.volumes").at(0);
    EXPECT_EQ(kube::pathValue(volume, "csi.driver").as_string(), "csi.granary.io");
    EXPECT_EQ(kube::pathValue(volume, "csi.volumeAttributes.dataset").as_string(), "wiki");
    EXPECT_TRUE(kube::pathValue(volume, "csi.volumeAttributes.warmFirst").is_null())
        << "warmPolicy Parallel starts the workers on whatever is cached";
    EXPECT_EQ(kube::pathValue(pod, "spec.initContainers").is_array(), rank > 0)
        << "ranks above 0 wait for rank 0's DNS record";
  }
  auto service = client().get(resources::services(), ns(), "bert");
  ASSERT_TRUE(service.isOk()) << service.status();
  EXPECT_EQ(kube::pathValue(*service, "spec.clusterIP").as_string(), "None");
  EXPECT_TRUE(kube::pathValue(*service, "spec.publishNotReadyAddresses").as_bool());

  for (const auto& pod : workers()) {  // bound as the scheduler binds them
    ASSERT_TRUE(client().bindPod(ns(), kube::nameOf(pod), kube::uidOf(pod), "n1").isOk());
    setPhase(kube::nameOf(pod), "Running");
  }
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Running"; }, 20s)) << job().serialize();
  EXPECT_TRUE(kube::pathValue(job(), "status.startTime").is_string());
  EXPECT_EQ(kube::pathValue(job(), "status.workers.ready").as_integer(), 2);
  EXPECT_EQ(kube::pathValue(job(), "status.placement").size(), 2u);
  EXPECT_EQ(kube::pathValue(job(), "status.placement").at(0).at("cachedFraction").as_double(), 1.0);
  setPhase("bert-worker-0", "Succeeded");
  setPhase("bert-worker-1", "Succeeded");
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Succeeded"; }, 20s)) << job().serialize();
  EXPECT_TRUE(kube::pathValue(job(), "status.completionTime").is_string());
  EXPECT_TRUE(op::conditionOf(job().at("status"), "Succeeded").status);
  EXPECT_TRUE(hasEvent("Succeeded"));
}

TEST_F(TrainingJobControllerTest, EveryWorkerMountsTheJobsCheckpointsReadWriteWithItsSecret) {
  readyDataset("wiki");
  auto created = client().create(
      resources::trainingJobs(), ns(),
      yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: bert}\n"
           "spec:\n  workers: 2\n  gpusPerWorker: 0\n"
           "  datasets: [{name: wiki, mountPath: /data}]\n"
           "  checkpoints: {uri: 's3://runs/bert/', endpoint: 'http://minio:9000', "
           "secretRef: {name: runs-s3}, mountPath: /ckpt, bandwidthLimit: 100Mi, "
           "options: {addressing: path}}\n"
           "  template: {spec: {containers: [{name: trainer, image: pytorch}]}}"));
  ASSERT_TRUE(created.isOk()) << created.status();
  startOperator();
  ASSERT_TRUE(eventually([&] { return workers().size() == 2; }, 20s));
  for (const auto& pod : workers()) {
    // granary's own mounts only: a real API server's ServiceAccount admission adds the token's
    // projected volume and its mount besides.
    const std::vector<std::pair<Json, Json>> mounts = granaryMounts(pod);
    ASSERT_EQ(mounts.size(), 2u) << pod.serialize();
    EXPECT_EQ(mounts.at(0).first.at("mountPath").as_string(), "/data");
    EXPECT_EQ(mounts.at(1).first.at("mountPath").as_string(), "/ckpt");
    EXPECT_FALSE(mounts.at(1).first.has_boolean_field("readOnly"))
        << "the workers write their checkpoints";
    const Json& volume = mounts.at(1).second;
    std::map<std::string, std::string> attributes;
    const Json given = kube::pathValue(volume, "csi.volumeAttributes");
    for (const auto& [key, value] : given.as_object()) attributes[key] = value.as_string();
    EXPECT_EQ(attributes, (std::map<std::string, std::string>{{"checkpoints", "s3://runs/bert/"},
                                                              {"endpoint", "http://minio:9000"},
                                                              {"bandwidthLimit", "104857600"},
                                                              {"option.addressing", "path"}}));
    EXPECT_EQ(kube::pathValue(volume, "csi.nodePublishSecretRef.name").as_string(), "runs-s3")
        << "the kubelet hands the Secret to the node plugin; the pod never sees it";
  }
}

// The cache nodes give each namespace only its own directory of /srv/ckpt/{namespace}: a job
// naming another namespace's says so in its status and an Event (its workers' volumes would fail
// to mount), a job naming its own does not.
TEST_F(TrainingJobControllerTest, ACheckpointUriTheNodesRefuseIsAConditionAndAWarning) {
  checkpointRoots_ = *parseOriginRoots({"/srv/ckpt/{namespace}"}, "checkpointOriginRoots");
  readyDataset("wiki");
  createCheckpointingJob("bert", "file:///srv/ckpt/team-a/bert/");
  createCheckpointingJob("gpt", "file:///srv/ckpt/" + ns() + "/gpt/");
  startOperator();
  ASSERT_TRUE(
      eventually([&] { return conditionOfJob("bert", "CheckpointUriRefused").status; }, 20s))
      << job().serialize();
  const op::Condition refused = conditionOfJob("bert", "CheckpointUriRefused");
  EXPECT_EQ(refused.reason, "InOtherNamespacesDirectory");
  for (const std::string& said : std::vector<std::string>{
           "spec.checkpoints.uri: file:///srv/ckpt/team-a/bert/", "namespace " + ns(),
        "/srv/ckpt/" + ns() + "/", "cacheNode.checkpointOriginRoots"})
    EXPECT_NE(refused.message.find(said), std::string::npos) << said << " in " << refused.message;
  ASSERT_TRUE(eventually([&] { return warnings("bert", "CheckpointUriRefused").size() == 1; }, 10s));
  EXPECT_EQ(warnings("bert", "CheckpointUriRefused").at(0), refused.message);

  ASSERT_TRUE(eventually(
      [&] { return !conditionOfJob("gpt", "CheckpointUriRefused").reason.empty(); }, 20s));
  EXPECT_FALSE(conditionOfJob("gpt", "CheckpointUriRefused").status);
  EXPECT_EQ(conditionOfJob("gpt", "CheckpointUriRefused").reason, "WithinCheckpointRoots");
  EXPECT_TRUE(warnings("gpt", "CheckpointUriRefused").empty());
}

// Two running jobs of a namespace naming one checkpoint uri would overwrite and remove each other's
// files: the second created is told (a condition and an Warning Event naming the first), the first
// is left alone, and the second's condition clears once the first is gone.
TEST_F(TrainingJobControllerTest, TwoRunningJobsOnOneCheckpointUriWarnTheSecond) {
  readyDataset("wiki");
  createCheckpointingJob("bert", "file:///srv/ckpt/shared/");
  createCheckpointingJob("gpt", "file:///srv/ckpt/shared/");
  createCheckpointingJob("t5", "file:///srv/ckpt/t5/");
  startOperator();
  ASSERT_TRUE(eventually([&] { return conditionOfJob("gpt", "CheckpointUriShared").status; }, 20s));
  const op::Condition shared = conditionOfJob("gpt", "CheckpointUriShared");
  EXPECT_EQ(shared.reason, "UriOfAnotherJob");
  EXPECT_NE(shared.message.find("spec.checkpoints.uri: file:///srv/ckpt/shared/"),
            std::string::npos)
      << shared.message;
  EXPECT_NE(shared.message.find("TrainingJob bert"), std::string::npos) << shared.message;
  ASSERT_TRUE(eventually([&] { return warnings("gpt", "CheckpointUriShared").size() == 1; }, 10s));
  EXPECT_FALSE(conditionOfJob("bert", "CheckpointUriShared").status);
  EXPECT_TRUE(warnings("bert", "CheckpointUriShared").empty());
  EXPECT_FALSE(conditionOfJob("t5", "CheckpointUriShared").status);

  ASSERT_TRUE(client().remove(resources::trainingJobs(), ns(), "bert").isOk());
  ASSERT_TRUE(eventually(
      [&] {
        const op::Condition c = conditionOfJob("gpt", "CheckpointUriShared");
        return !c.status && c.reason == "OwnUri";
      },
      20s))
      << "the first job gone, the second's uri is its own";
  EXPECT_EQ(warnings("gpt", "CheckpointUriShared").size(), 1u);
}

TEST_F(TrainingJobControllerTest, AFailedWorkerRestartsTheWholeGangUpToTheBackoffLimit) {
  readyDataset("wiki");
  createJob("{backoffLimit: 1}");
  startOperator();
  ASSERT_TRUE(eventually([&] { return workers().size() == 2; }, 20s));
  setPhase("bert-worker-0", "Running");
  setPhase("bert-worker-1", "Failed", 1);
  ASSERT_TRUE(eventually(
      [&] {
        const auto pods = workers();
        return pods.size() == 2 && attemptOf(pods[0]) == "1" && attemptOf(pods[1]) == "1";
      },
      20s))
      << "both workers, not only the failed one, come back in attempt 1: " << job().serialize()
      << " " << ::testing::PrintToString(workers().size());
  EXPECT_EQ(kube::pathValue(job(), "status.restarts").as_integer(), 1);
  EXPECT_TRUE(hasEvent("Restarting"));
  setPhase("bert-worker-1", "Failed", 137);
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Failed"; }, 20s)) << job().serialize();
  EXPECT_EQ(op::conditionOf(job().at("status"), "Failed").reason, "BackoffLimitExceeded");
  ASSERT_TRUE(eventually(
      [&] { return workers().size() == 1 && kube::nameOf(workers()[0]) == "bert-worker-1"; }, 20s))
      << "cleanPodPolicy Running deletes the workers still running and keeps the failed one";
}

// An elastic job: the workers meet at a store pod of their own behind a Service; a failed worker
// is replaced alone (the others' pods are the same pods), and the change is in the status and
// an Event.
TEST_F(TrainingJobControllerTest, AnElasticJobReplacesAFailedWorkerAlone) {
  readyDataset("wiki");
  createElasticJob(3, 2);
  startOperator(realClock(), true);
  ASSERT_TRUE(eventually([&] { return workers().size() == 3; }, 20s));
  std::map<std::string, std::string> uids;
  for (const auto& pod : workers()) {
    setPhase(kube::nameOf(pod), "Running");
    uids[kube::nameOf(pod)] = kube::uidOf(pod);
    const Json& container = pod.at("spec").at("containers").at(0);
    EXPECT_EQ(env(container, "PET_RDZV_ENDPOINT"), "bert-rendezvous." + ns() + ".svc:29400");
    EXPECT_EQ(env(container, "PET_NNODES"), "2:3");
    EXPECT_EQ(env(container, "MASTER_ADDR"), "<unset>");
  }
  auto store = client().get(resources::pods(), ns(), "bert-rendezvous");
  ASSERT_TRUE(store.isOk()) << store.status();
  EXPECT_EQ(kube::pathValue(*store, "spec.containers").at(0).at("image").as_string(), "pytorch");
  EXPECT_TRUE(kube::stringMap(*store).contains(names::kRendezvousLabel));
  EXPECT_FALSE(kube::stringMap(*store).contains(names::kJobNameLabel))
      << "the store is not one of the gang's workers";
  auto storeService = client().get(resources::services(), ns(), "bert-rendezvous");
  ASSERT_TRUE(storeService.isOk()) << storeService.status();
  const Json ports = kube::pathValue(*storeService, "spec.ports");
  ASSERT_EQ(ports.size(), 2u) << "torch's store, and the notices of agents gone";
  EXPECT_EQ(ports.at(1).at("port").as_integer(), 29401);
  const Json command = kube::pathValue(*store, "spec.containers").at(0).at("command");
  EXPECT_EQ(command.at(command.size() - 1).as_string(), "29401");
  // The store takes notices only with its job's token, from a Secret of the job's (a pod that may
  // not read Secrets cannot learn it), owned by the job.
  const Json tokenEnv = kube::pathValue(*store, "spec.containers").at(0).at("env").at(0);
  EXPECT_EQ(tokenEnv.at("name").as_string(), api::kRendezvousTokenEnv);
  EXPECT_EQ(kube::pathValue(tokenEnv, "valueFrom.secretKeyRef.name").as_string(),
            "bert-rendezvous");
  auto tokenSecret = client().get(resources::secrets(), ns(), "bert-rendezvous");
  ASSERT_TRUE(tokenSecret.isOk()) << tokenSecret.status();
  EXPECT_EQ(kube::pathValue(*tokenSecret, "metadata.ownerReferences").at(0).at("uid").as_string(),
            kube::uidOf(job()));
  const Json storedToken = kube::pathValue(
      *tokenSecret,
      "data." + kube::pathValue(tokenEnv, "valueFrom.secretKeyRef.key").as_string());
  ASSERT_TRUE(storedToken.is_string()) << tokenSecret->serialize();
  EXPECT_GE(storedToken.as_string().size(), 64u) << "a token of 32 bytes or more, base64";
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Running"; }, 20s)) << job().serialize();

  setPhase("bert-worker-1", "Failed", 137);
  ASSERT_TRUE(eventually([&] { return recreated("bert-worker-1", uids["bert-worker-1"]); }, 20s))
      << "the failed worker is created again: " << job().serialize();
  for (const auto& pod : workers()) {
    if (kube::nameOf(pod) != "bert-worker-1") {
      EXPECT_EQ(kube::uidOf(pod), uids[kube::nameOf(pod)]) << kube::nameOf(pod) << " was deleted";
    }
    EXPECT_EQ(attemptOf(pod), "0") << "no gang restart";
  }
  EXPECT_TRUE(hasEvent("WorkerLost"));
  EXPECT_EQ(notices(),
            std::vector<std::string>{"bert-rendezvous." + ns() + ".svc:29401 rendezvous " +
                                     kube::uidOf(job()) + "-0\nhost bert-worker-1\n"})
      << "the store hears at once that worker 1's agent is gone";
  ASSERT_EQ(noticeTokens_.size(), 1u);
  EXPECT_EQ(rules::base64(noticeTokens_[0]), storedToken.as_string())
      << "the notice carries the token the store reads from its Secret";
  const Json status = job().at("status");
  EXPECT_EQ(kube::pathValue(status, "restarts").as_integer(), 0);
  EXPECT_EQ(kube::pathValue(status, "elastic.replacements").as_integer(), 1);
  EXPECT_EQ(kube::pathValue(status, "elastic.changes").at(0).at("kind").as_string(), "Lost");
  EXPECT_EQ(jobPhase(), "Running");

  // The replacement runs: it joined, and the series say so.
  for (const auto& pod : workers())
    if (kube::nameOf(pod) == "bert-worker-1") setPhase("bert-worker-1", "Running");
  const std::string labels = "job=\"bert\",namespace=\"" + ns() + "\"";
  const auto kind = [&](const std::string& k) {
    return "job=\"bert\",kind=\"" + k + "\",namespace=\"" + ns() + "\"";
  };
  ASSERT_TRUE(eventually(
      [&] {
        return registry_.exposition().find("granary_job_membership_changes_total{" +
                                           kind("Joined") + "} 1") != std::string::npos;
      },
      20s))
      << registry_.exposition();
  const std::string metrics = registry_.exposition();
  EXPECT_NE(metrics.find("granary_job_membership_changes_total{" + kind("Lost") + "} 1"),
            std::string::npos);
  EXPECT_NE(metrics.find("granary_job_workers_running{" + labels + "} 3"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("granary_job_worker_recovery_seconds_count{namespace=\"" + ns() + "\"} 1"),
            std::string::npos);
  EXPECT_TRUE(hasEvent("WorkerJoined"));
}

// A worker whose node stopped reporting: once the node has not been Ready for kNodeLostAfter, its
// pod is deleted without grace (no kubelet is left to confirm a graceful deletion) and created
// again; the others' pods are untouched.
TEST_F(TrainingJobControllerTest, AnElasticJobReplacesAWorkerWhoseNodeIsLost) {
  readyDataset("wiki");
  TestNode healthy(client(), "gpu-healthy"), lost(client(), "gpu-lost");
  ASSERT_TRUE(healthy.status().isOk() && lost.status().isOk()) << lost.status();
  createElasticJob(3, 2);
  startOperator();
  ASSERT_TRUE(eventually([&] { return workers().size() == 3; }, 20s));
  std::map<std::string, std::string> uids;
  for (const auto& pod : workers()) {
    const std::string name = kube::nameOf(pod);
    const std::string node = name == "bert-worker-1" ? lost.name() : healthy.name();
    ASSERT_TRUE(client().bindPod(ns(), name, kube::uidOf(pod), node).isOk());
    setPhase(name, "Running");
    uids[name] = kube::uidOf(pod);
  }
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Running"; }, 20s)) << job().serialize();

  // The node lifecycle controller's part: the node not Ready for a while, its pods not Ready.
  ASSERT_TRUE(lost.lose(std::chrono::system_clock::now() - op::kNodeLostAfter).isOk());
  ASSERT_TRUE(client()
                  .mergePatch(resources::pods(), ns(), "bert-worker-1",
                              yaml("status: {conditions: [{type: Ready, status: \"False\"}]}"),
                              "status")
                  .isOk());
  ASSERT_TRUE(eventually([&] { return recreated("bert-worker-1", uids["bert-worker-1"]); }, 30s))
      << "the worker on the lost node is created again: " << job().serialize();
  for (const auto& pod : workers())
    if (kube::nameOf(pod) != "bert-worker-1") {
      EXPECT_EQ(kube::uidOf(pod), uids[kube::nameOf(pod)]) << kube::nameOf(pod) << " was deleted";
    }
  const Json change = kube::pathValue(job(), "status.elastic.changes").at(0);
  EXPECT_EQ(change.at("cause").as_string(), "worker 1's node gpu-lost is not Ready");
  ASSERT_EQ(notices().size(), 1u);
  EXPECT_NE(notices()[0].find("host bert-worker-1\n"), std::string::npos) << notices()[0];
  EXPECT_EQ(jobPhase(), "Running");
}

// Eight elastic workers, two lost at once: only those two pods are deleted and created again,
// and the operator's writes for the two changes are counted (printed for docs/benchmarks.md).
TEST_F(TrainingJobControllerTest, AnElasticJobLosingTwoOfEightWorkersTouchesOnlyThoseTwo) {
  readyDataset("wiki");
  createElasticJob(8, 6);
  startOperator();
  ASSERT_TRUE(eventually([&] { return workers().size() == 8; }, 20s));
  std::map<std::string, std::string> uids;
  for (const auto& pod : workers()) {
    setPhase(kube::nameOf(pod), "Running");
    uids[kube::nameOf(pod)] = kube::uidOf(pod);
  }
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Running"; }, 20s)) << job().serialize();
  ASSERT_TRUE(eventually(
      [&] { return kube::pathValue(job(), "status.elastic.running").as_integer() == 8; }, 20s));
  clearWrites();

  setPhase("bert-worker-3", "Failed", 137);
  setPhase("bert-worker-5", "Failed", 1);
  const auto replaced = [&](const std::string& name) {
    for (const auto& pod : workers())
      if (kube::nameOf(pod) == name && kube::uidOf(pod) != uids[name]) return true;
    return false;
  };
  ASSERT_TRUE(
      eventually([&] { return replaced("bert-worker-3") && replaced("bert-worker-5"); }, 20s))
      << job().serialize();
  setPhase("bert-worker-3", "Running");
  setPhase("bert-worker-5", "Running");
  ASSERT_TRUE(eventually(
      [&] { return kube::pathValue(job(), "status.elastic.membershipChanges").as_integer() == 4; },
      20s))
      << job().serialize();
  for (const auto& pod : workers()) {
    const std::string name = kube::nameOf(pod);
    if (name != "bert-worker-3" && name != "bert-worker-5") {
      EXPECT_EQ(kube::uidOf(pod), uids[name]) << name << " was deleted";
    }
  }
  // A create answered 409 is a reconcile from a cache that had not yet seen the pod it created.
  int podDeletes = 0, podCreates = 0, podCreatesRefused = 0, statusWrites = 0, other = 0;
  for (const auto& w : writes()) {
    if (w.starts_with("DELETE") && w.find("/pods/") != std::string::npos) {
      ++podDeletes;
    } else if (w.starts_with("POST") && w.find("/pods ") != std::string::npos) {
      ++(w.ends_with(" 409") ? podCreatesRefused : podCreates);
    } else if (w.find("/trainingjobs/bert/status") != std::string::npos) {
      ++statusWrites;
    } else {
      ++other;
    }
  }
  EXPECT_EQ(podDeletes, 2) << ::testing::PrintToString(writes());
  EXPECT_EQ(podCreates, 2) << ::testing::PrintToString(writes());
  std::printf(
      "2 of 8 workers lost and replaced: %d pod deletes, %d pod creates (and %d answered 409), "
      "%d status writes, %d other writes (events) for 4 membership changes\n",
      podDeletes, podCreates, podCreatesRefused, statusWrites, other);
}

// Once spec.workers run, an elastic job asks for workers up to maxWorkers, each labelled for
// granary-scheduler to place on its own.
TEST_F(TrainingJobControllerTest, AnElasticJobAsksForWorkersUpToMaxWorkersOnceItRuns) {
  readyDataset("wiki");
  auto created = client().create(
      resources::trainingJobs(), ns(),
      yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: bert}\n"
           "spec:\n  workers: 2\n  elastic: {minWorkers: 1, maxWorkers: 3}\n"
           "  gpusPerWorker: 0\n  datasets: [{name: wiki, mountPath: /data}]\n"
           "  template: {spec: {containers: [{name: trainer, image: pytorch}]}}"));
  ASSERT_TRUE(created.isOk()) << created.status();
  startOperator();
  ASSERT_TRUE(eventually([&] { return workers().size() == 2; }, 20s));
  for (const auto& pod : workers()) {
    EXPECT_FALSE(kube::stringMap(pod).contains(names::kSurplusLabel)) << kube::nameOf(pod);
    setPhase(kube::nameOf(pod), "Running");
  }
  ASSERT_TRUE(eventually([&] { return workers().size() == 3; }, 20s)) << job().serialize();
  auto third = client().get(resources::pods(), ns(), "bert-worker-2");
  ASSERT_TRUE(third.isOk()) << third.status();
  EXPECT_EQ(kube::stringMap(*third).at(names::kSurplusLabel), "true");
  EXPECT_EQ(jobPhase(), "Running");
}

TEST_F(TrainingJobControllerTest, SuspendDeletesTheWorkersAndResumeBringsThemBack) {
  readyDataset("wiki");
  createJob();
  startOperator();
  ASSERT_TRUE(eventually([&] { return workers().size() == 2; }, 20s));
  const auto suspend = [&](bool value) {
    return edit(client(), resources::trainingJobs(), ns(), "bert",
                [&](Json& job) { job["spec"]["suspend"] = Json::boolean(value); });
  };
  ASSERT_TRUE(suspend(true).isOk());
  ASSERT_TRUE(eventually([&] { return workers().empty() && jobPhase() == "Suspended"; }, 20s))
      << job().serialize();
  ASSERT_TRUE(suspend(false).isOk());
  ASSERT_TRUE(eventually([&] { return workers().size() == 2; }, 20s)) << job().serialize();
  EXPECT_FALSE(op::conditionOf(job().at("status"), "Suspended").status);
}

TEST_F(TrainingJobControllerTest, AMissingDatasetIsAConditionAndAnEventNotASilentWait) {
  createJob();
  startOperator();
  ASSERT_TRUE(eventually(
      [&] {
        return op::conditionOf(kube::pathValue(job(), "status"), "DatasetsReady").reason ==
               "DatasetNotFound";
      },
      20s))
      << job().serialize();
  EXPECT_TRUE(hasEvent("DatasetNotFound"));
  EXPECT_TRUE(workers().empty());
  readyDataset("wiki");
  ASSERT_TRUE(eventually([&] { return workers().size() == 2; }, 20s)) << job().serialize();
}

TEST_F(TrainingJobControllerTest, WorkersStuckPendingFailTheJobAtTheStartDeadline) {
  readyDataset("wiki");
  // The deadline counts from the pods' creation time, which has whole seconds: 5 s leaves the
  // patch below at least 4 s to land before it.
  createJob("{startDeadlineSeconds: 5}");
  startOperator();
  ASSERT_TRUE(eventually([&] { return workers().size() == 2; }, 20s));
  ASSERT_TRUE(client()
                  .mergePatch(resources::pods(), ns(), "bert-worker-1",
                              yaml("status: {phase: Pending, containerStatuses: [{name: trainer, "
                                   "state: {waiting: {reason: ImagePullBackOff}}}]}"),
                              "status")
                  .isOk());
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Failed"; }, 20s)) << job().serialize();
  const op::Condition failed = op::conditionOf(job().at("status"), "Failed");
  EXPECT_EQ(failed.reason, "StartDeadlineExceeded");
  EXPECT_NE(failed.message.find("ImagePullBackOff"), std::string::npos) << failed.message;
}

TEST_F(TrainingJobControllerTest, BeforeStartIsWarmingUntilTheDatasetIsReady) {
  readyDataset("wiki");
  ASSERT_TRUE(client()
                  .mergePatch(resources::datasets(), ns(), "wiki", yaml("status: {phase: Warming}"),
                              "status")
                  .isOk());
  createJob("{}", 2, "BeforeStart");
  startOperator();
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Warming"; }, 20s)) << job().serialize();
  EXPECT_TRUE(workers().empty());
  ASSERT_TRUE(
      client()
          .mergePatch(resources::datasets(), ns(), "wiki", yaml("status: {phase: Ready}"), "status")
          .isOk());
  ASSERT_TRUE(eventually([&] { return workers().size() == 2 && jobPhase() == "Pending"; }, 20s))
      << job().serialize();
  // Each worker's volume is published only once its node's share is warm: a worker placed on a
  // node that joined the dataset's set later (a replacement, a worker growing an elastic job)
  // starts on warm data too.
  for (const auto& pod : workers()) {
    const Json volume = kube::pathValue(pod, "spec.volumes").at(0);
    EXPECT_EQ(kube::pathValue(volume, "csi.volumeAttributes.warmFirst").as_string(), "true");
  }
}

TEST_F(TrainingJobControllerTest, ADeletedWorkerRestartsTheWholeGang) {
  readyDataset("wiki");
  createJob();
  startOperator();
  runAll();
  ASSERT_TRUE(client().remove(resources::pods(), ns(), "bert-worker-1").isOk());
  ASSERT_TRUE(eventually(
      [&] {
        const auto pods = workers();
        return pods.size() == 2 && attemptOf(pods[0]) == "1" && attemptOf(pods[1]) == "1";
      },
      20s))
      << "rank 0 of attempt 0 goes too, not only rank 1 comes back: " << job().serialize();
  const op::Condition restarting = op::conditionOf(job().at("status"), "Restarting");
  EXPECT_EQ(restarting.reason, "WorkerLost");
  EXPECT_EQ(kube::pathValue(job(), "status.restarts").as_integer(), 1);
}

TEST_F(TrainingJobControllerTest, AnEvictedWorkerIsRetriedWithoutSpendingTheBackoffLimit) {
  readyDataset("wiki");
  createJob("{backoffLimit: 0}");
  startOperator();
  runAll();
  ASSERT_TRUE(client()
                  .mergePatch(resources::pods(), ns(), "bert-worker-1",
                              yaml("status: {phase: Failed, reason: Evicted, message: \"The node "
                                   "was low on resource: memory.\"}"),
                              "status")
                  .isOk());
  ASSERT_TRUE(eventually(
      [&] {
        const auto pods = workers();
        return pods.size() == 2 && attemptOf(pods[0]) == "1" && attemptOf(pods[1]) == "1";
      },
      20s))
      << job().serialize();
  EXPECT_EQ(kube::pathValue(job(), "status.disruptions").as_integer(), 1);
  EXPECT_EQ(op::conditionOf(job().at("status"), "Restarting").reason, "WorkerDisrupted");
  // A real failure then meets backoffLimit 0.
  setPhase("bert-worker-0", "Failed", 1);
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Failed"; }, 20s)) << job().serialize();
  EXPECT_EQ(op::conditionOf(job().at("status"), "Failed").reason, "BackoffLimitExceeded");
}

TEST_F(TrainingJobControllerTest, ActiveDeadlineSecondsFailsARunningJob) {
  readyDataset("wiki");
  createJob("{activeDeadlineSeconds: 60}");
  startOperator(clock_);
  runAll();  // Running at the clock's start: the deadline is 60 s of the FakeClock away
  EXPECT_EQ(kube::pathValue(job(), "status.startTime").as_string(),
            kube::metav1Time(clock_.wallNow()));
  clock_.advance(60s);
  touchJob();
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Failed"; }, 20s)) << job().serialize();
  EXPECT_EQ(op::conditionOf(job().at("status"), "Failed").reason, "DeadlineExceeded");
  EXPECT_EQ(kube::pathValue(job(), "status.completionTime").as_string(),
            kube::metav1Time(clock_.wallNow()));
  ASSERT_TRUE(eventually([&] { return workers().empty(); }, 20s))
      << "cleanPodPolicy Running deletes the workers that still ran";
}

TEST_F(TrainingJobControllerTest, TtlSecondsAfterFinishedDeletesTheJob) {
  readyDataset("wiki");
  createJob("{ttlSecondsAfterFinished: 30}");
  startOperator(clock_);
  runAll();
  setPhase("bert-worker-0", "Succeeded");
  setPhase("bert-worker-1", "Succeeded");
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Succeeded"; }, 20s)) << job().serialize();
  EXPECT_EQ(kube::pathValue(job(), "status.completionTime").as_string(),
            kube::metav1Time(clock_.wallNow()))
      << "the TTL counts from here, on the FakeClock";
  clock_.advance(30s);
  // The controller's requeue for the TTL, on the FakeClock, may act before the touch does.
  const Status touched = touch();
  ASSERT_TRUE(touched.isOk() || touched.code() == StatusCode::kNotFound) << touched.message();
  ASSERT_TRUE(eventually([&] { return jobGone(); }, 20s)) << job().serialize();
}

TEST_F(TrainingJobControllerTest, CleanPodPolicyAllDeletesEveryWorkerWhenTheJobEnds) {
  readyDataset("wiki");
  createJob("{backoffLimit: 0, cleanPodPolicy: All}");
  startOperator();
  runAll();
  setPhase("bert-worker-1", "Failed", 1);
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Failed"; }, 20s)) << job().serialize();
  ASSERT_TRUE(eventually([&] { return workers().empty(); }, 20s)) << "the failed worker goes too";
}

TEST_F(TrainingJobControllerTest, CleanPodPolicyNoneKeepsEveryWorker) {
  readyDataset("wiki");
  createJob("{backoffLimit: 0, cleanPodPolicy: None}");
  startOperator();
  runAll();
  setPhase("bert-worker-1", "Failed", 1);
  ASSERT_TRUE(eventually([&] { return jobPhase() == "Failed"; }, 20s)) << job().serialize();
  // The reconcile that failed the job deletes what it deletes before it records the event.
  ASSERT_TRUE(hasEvent("BackoffLimitExceeded"));
  EXPECT_EQ(workers().size(), 2u) << "the running worker stays for its logs";
}

}  // namespace
}  // namespace granary::testing
