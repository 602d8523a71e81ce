// granary-scheduler against the API-server double, or a real cluster (GRANARY_TEST_KUBECONFIG):
// gangs bound where their data is cached, and unschedulable gangs explained.
#include <gtest/gtest.h>

#include <set>

#include "common/kube/manager.h"
#include "scheduler/scheduler.h"
#include "tests/support/cluster.h"
#include "tests/support/rbac_check.h"

namespace granary::testing {
namespace {

using kube::Json;
namespace resources = kube::resources;
using namespace std::chrono_literals;

class SchedulerIntegration : public ClusterTest {
 protected:
  void SetUp() override {
    ClusterTest::SetUp();
    if (HasFatalFailure()) return;
    // Nodes are made for the test (named after its namespace), kept Ready by a heartbeat as a
    // hollow kubelet keeps them (TestNode), and deleted afterwards.
    suffix_ = ns().substr(ns().rfind('-') + 1);
  }
  void TearDown() override {
    running_.reset();
    scheduler_.reset();
    manager_.reset();
    schedulerClient_.reset();
    EXPECT_EQ(rbac_.notGranted(), std::vector<std::string>{})
        << "the chart must grant granary-scheduler every request it made";
    nodes_.clear();
    ClusterTest::TearDown();
  }

  std::string node(const std::string& name) {
    nodes_.push_back(std::make_unique<TestNode>(client(), name + "-" + suffix_, R"(
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
)"));
    EXPECT_TRUE(nodes_.back()->status().isOk()) << nodes_.back()->status();
    return nodes_.back()->name();
  }

  void job(const std::string& name, int workers, const std::string& locality = "Preferred") {
    auto created = client().create(
        resources::trainingJobs(), ns(),
        yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: " + name +
             "}\n"
             "spec:\n  workers: " +
             std::to_string(workers) +
             "\n  gpusPerWorker: 8\n"
             "  datasets: [{name: imagenet, mountPath: /data}]\n"
             "  scheduling: {locality: " +
             locality +
             "}\n"
             "  template: {spec: {containers: [{name: t, image: busybox}]}}"));
    ASSERT_TRUE(created.isOk()) << created.status();
  }

  void dataset(const std::vector<std::string>& cachedOn) {
    ASSERT_TRUE(
        client()
            .create(
                resources::datasets(), ns(),
                yaml("apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: imagenet}\n"
                     "spec: {source: {uri: \"s3://bucket/imagenet/\"}}"))
            .isOk());
    std::string nodes;
    for (const auto& n : cachedOn) nodes += "{name: " + n + ", cachedBytes: 500},";
    auto status =
        client().mergePatch(resources::datasets(), ns(), "imagenet",
                            yaml("status: {totalBytes: 1000, nodes: [" + nodes + "]}"), "status");
    ASSERT_TRUE(status.isOk()) << status.status();
  }

  void worker(const std::string& job, int rank) {
    auto created =
        client().create(resources::pods(), ns(),
                        yaml("metadata: {name: " + job + "-worker-" + std::to_string(rank) +
                             ", labels: {granary.io/job-name: " + job +
                             "}}\n"
                             "spec:\n  schedulerName: granary-scheduler\n"
                             "  containers: [{name: t, image: busybox, resources: {limits: "
                             "{nvidia.com/gpu: \"8\"}, requests: {cpu: \"4\"}}}]"));
    ASSERT_TRUE(created.isOk()) << created.status();
  }

  std::string boundNode(const std::string& pod) {
    auto got = client().get(resources::pods(), ns(), pod);
    if (!got.isOk()) return "";
    const Json node = kube::pathValue(*got, "spec.nodeName");
    return node.is_string() ? node.as_string() : "";
  }

  std::string scheduledMessage(const std::string& pod) {
    auto got = client().get(resources::pods(), ns(), pod);
    if (!got.isOk()) return "";
    const Json conditions = kube::pathValue(*got, "status.conditions");
    if (!conditions.is_array()) return "";
    for (const auto& c : conditions.as_array()) {
      if (c.at("type").as_string() == "PodScheduled" && c.at("status").as_string() == "False") {
        return c.at("message").as_string();
      }
    }
    return "";
  }

  // The scheduler with a client of its own, whose requests are checked against the chart's RBAC.
  void startScheduler() {
    auto schedulerClient =
        kube::Client::create(cluster_->restConfig(), {.onResponse = rbac_.recorder()});
    ASSERT_TRUE(schedulerClient.isOk()) << schedulerClient.status();
    schedulerClient_ = std::move(*schedulerClient);
    auto manager = kube::Manager::create(*schedulerClient_, {.metricsAddress = ""}, registry_);
    ASSERT_TRUE(manager.isOk()) << manager.status();
    manager_ = std::move(*manager);
    auto scheduler = scheduler::Scheduler::create(*manager_, {.retryInterval = 200ms}, registry_);
    ASSERT_TRUE(scheduler.isOk()) << scheduler.status();
    scheduler_ = std::move(*scheduler);
    running_ =
        std::make_unique<Running>([this](std::stop_token stop) { (void)manager_->run(stop); });
  }

  std::string suffix_;
  std::vector<std::unique_ptr<TestNode>> nodes_;
  MetricsRegistry registry_;
  RbacCheck rbac_{"granary-scheduler"};
  std::unique_ptr<kube::Client> schedulerClient_;
  std::unique_ptr<kube::Manager> manager_;
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<Running> running_;
};

TEST_F(SchedulerIntegration, BindsTheGangWhereTheDataIsCached) {
  const std::string a = node("a"), b = node("b"), c = node("c");
  dataset({b, c});
  job("resnet", 2);
  worker("resnet", 0);
  worker("resnet", 1);
  startScheduler();
  ASSERT_TRUE(eventually(
      [&] {
        return !boundNode("resnet-worker-0").empty() && !boundNode("resnet-worker-1").empty();
      },
      30s));
  const std::set<std::string> placed{boundNode("resnet-worker-0"), boundNode("resnet-worker-1")};
  EXPECT_EQ(placed, (std::set<std::string>{b, c}));

  auto events = client().list(resources::events(), ns(),
                              {.fieldSelector = "involvedObject.name=resnet-worker-0"});
  ASSERT_TRUE(events.isOk());
  ASSERT_FALSE(events->items.empty());
  EXPECT_EQ(events->items[0].at("reason").as_string(), "Scheduled");
  // Counted once the binding is answered, which the test may see first.
  EXPECT_TRUE(eventually(
      [&] {
        return registry_.exposition().find("granary_scheduler_bound_pods_total 2") !=
               std::string::npos;
      },
      10s))
      << registry_.exposition();
}

// A restarted gang reads its newest checkpoint back: the nodes holding it (status.checkpoints)
// count as caching its bytes, beside the job's datasets.
TEST_F(SchedulerIntegration, ARestartedGangIsPlacedWhereItsNewestCheckpointIs) {
  const std::string a = node("a"), b = node("b"), c = node("c");
  dataset({a});
  job("resume", 2);
  auto status = client().mergePatch(
      resources::trainingJobs(), ns(), "resume",
      yaml("status: {checkpoints: {newest: step-20, items: [{name: step-20, files: 4, bytes: "
           "4000, nodes: [" +
           b + ", " + c + "], atOrigin: true}, {name: step-10, bytes: 4000, nodes: [" + a +
           "]}]}}"),
      "status");
  ASSERT_TRUE(status.isOk()) << status.status();
  worker("resume", 0);
  worker("resume", 1);
  startScheduler();
  ASSERT_TRUE(eventually(
      [&] {
        return !boundNode("resume-worker-0").empty() && !boundNode("resume-worker-1").empty();
      },
      30s));
  EXPECT_EQ((std::set<std::string>{boundNode("resume-worker-0"), boundNode("resume-worker-1")}),
            (std::set<std::string>{b, c}))
      << "the 4000 bytes of step-20 on " << b << " and " << c << " outweigh the dataset's 500 on "
      << a;
}

// An elastic job's replacement is a gang of what is missing: the workers still running count as
// placed, and a rank the operator left vacant (status.elastic.vacant) is not waited for.
TEST_F(SchedulerIntegration, AnElasticJobsReplacementIsPlacedWhereTheDataIsCached) {
  const std::string a = node("a"), b = node("b");
  dataset({b});
  job("elastic", 3);
  auto vacant = client().mergePatch(resources::trainingJobs(), ns(), "elastic",
                                    yaml("status: {elastic: {vacant: [2]}}"), "status");
  ASSERT_TRUE(vacant.isOk()) << vacant.status();
  auto running = client().create(
      resources::pods(), ns(),
      yaml("metadata: {name: elastic-worker-0, labels: {granary.io/job-name: elastic}}\n"
           "spec:\n  schedulerName: granary-scheduler\n  nodeName: " +
           a + "\n  containers: [{name: t, image: busybox}]"));
  ASSERT_TRUE(running.isOk()) << running.status();
  worker("elastic", 1);  // the replacement
  startScheduler();
  ASSERT_TRUE(eventually([&] { return !boundNode("elastic-worker-1").empty(); }, 30s))
      << scheduledMessage("elastic-worker-1");
  EXPECT_EQ(boundNode("elastic-worker-1"), b) << "where the data is cached";
}

// An elastic job's workers beyond spec.workers (granary.io/surplus) are placed one by one as
// capacity allows, not all or none: with room for one of two, one is bound.
TEST_F(SchedulerIntegration, AnElasticJobGrowsOneWorkerAtATimeAsCapacityAllows) {
  const std::string a = node("a"), b = node("b");
  dataset({b});
  job("grow", 1);
  auto placed = client().create(
      resources::pods(), ns(),
      yaml("metadata: {name: grow-worker-0, labels: {granary.io/job-name: grow}}\n"
           "spec:\n  schedulerName: granary-scheduler\n  nodeName: " +
           a +
           "\n  containers: [{name: t, image: busybox, resources: {limits: {nvidia.com/gpu: "
           "\"8\"}}}]"));
  ASSERT_TRUE(placed.isOk()) << placed.status();
  for (int rank : {1, 2}) {
    auto created = client().create(
        resources::pods(), ns(),
        yaml("metadata: {name: grow-worker-" + std::to_string(rank) +
             ", labels: {granary.io/job-name: grow, granary.io/surplus: \"true\"}}\n"
             "spec:\n  schedulerName: granary-scheduler\n"
             "  containers: [{name: t, image: busybox, resources: {limits: {nvidia.com/gpu: "
             "\"8\"}}}]"));
    ASSERT_TRUE(created.isOk()) << created.status();
  }
  startScheduler();
  ASSERT_TRUE(eventually(
      [&] { return !boundNode("grow-worker-1").empty() || !boundNode("grow-worker-2").empty(); },
      30s))
      << scheduledMessage("grow-worker-1");
  EXPECT_EQ(
      boundNode("grow-worker-1").empty() ? boundNode("grow-worker-2") : boundNode("grow-worker-1"),
      b);
  EXPECT_TRUE(boundNode("grow-worker-1").empty() || boundNode("grow-worker-2").empty())
      << "one node free, one worker bound";
}

TEST_F(SchedulerIntegration, ExplainsAGangThatCannotFitAndBindsNothing) {
  node("a");
  node("b");
  dataset({});
  job("big", 3);
  for (int r = 0; r < 3; ++r) worker("big", r);
  startScheduler();
  ASSERT_TRUE(eventually([&] { return !scheduledMessage("big-worker-2").empty(); }, 30s));
  EXPECT_EQ(scheduledMessage("big-worker-0"),
            "0/2 nodes can take all 3 workers of " + ns() + "/big (room for 2)");
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(boundNode("big-worker-" + std::to_string(r)), "") << "all or none";
  auto events = client().list(resources::events(), ns(),
                              {.fieldSelector = "involvedObject.name=big-worker-1"});
  ASSERT_TRUE(events.isOk());
  ASSERT_FALSE(events->items.empty());
  EXPECT_EQ(events->items[0].at("reason").as_string(), "FailedScheduling");

  // Room appears: the gang is placed on the next attempt.
  node("c");
  ASSERT_TRUE(eventually([&] { return !boundNode("big-worker-2").empty(); }, 30s));
}

TEST_F(SchedulerIntegration, WaitsForEveryWorkerOfTheJob) {
  node("a");
  node("b");
  node("c");
  dataset({});
  job("late", 3);
  worker("late", 0);
  worker("late", 1);
  startScheduler();
  ASSERT_TRUE(eventually([&] { return !scheduledMessage("late-worker-0").empty(); }, 30s));
  EXPECT_EQ(scheduledMessage("late-worker-0"), "waiting for all workers: 2 of 3 exist");
  EXPECT_EQ(boundNode("late-worker-0"), "");
  worker("late", 2);
  ASSERT_TRUE(eventually([&] { return !boundNode("late-worker-2").empty(); }, 30s));
  EXPECT_NE(boundNode("late-worker-0"), "");
}

TEST_F(SchedulerIntegration, RequiredLocalityOnlyUsesCachingNodes) {
  node("a");
  const std::string b = node("b");
  dataset({b});
  job("strict", 2, "Required");
  worker("strict", 0);
  worker("strict", 1);
  startScheduler();
  ASSERT_TRUE(eventually([&] { return !scheduledMessage("strict-worker-0").empty(); }, 30s));
  EXPECT_NE(scheduledMessage("strict-worker-0").find("did not cache the job's datasets"),
            std::string::npos);
}

}  // namespace
}  // namespace granary::testing
