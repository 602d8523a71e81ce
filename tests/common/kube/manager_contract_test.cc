// The controller runtime end to end: informers, queue, workers, events, metrics, health and
// leader election, against the API-server double or a real cluster (GRANARY_TEST_KUBECONFIG).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/kube/manager.h"
#include "tests/support/cluster.h"
#include "tests/support/http_get.h"

namespace granary::testing {
namespace {

using kube::Json;
namespace resources = kube::resources;
using namespace std::chrono_literals;

class ManagerContract : public ClusterTest {
 protected:
  Json dataset(const std::string& name) {
    return yaml("apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: " + name +
                "}\nspec: {source: {uri: \"s3://bucket/" + name + "/\"}}");
  }

  // A reconciler that marks each Dataset Ready with its observed generation.
  kube::Reconciler markReady(kube::Informer& informer, kube::Manager& manager,
                             std::atomic<int>& calls) {
    return [&](const std::string& key, std::stop_token) -> Result<kube::ReconcileResult> {
      ++calls;
      kube::ObjectPtr object = informer.store().get(key);
      if (!object) return kube::ReconcileResult::done();  // deleted: nothing to do
      Json status = Json::object();
      status["status"] = Json::object();
      status["status"]["phase"] = Json::string("Ready");
      status["status"]["observedGeneration"] = object->at("metadata").at("generation");
      const auto [ns, name] = kube::splitKey(key);
      GRANARY_RETURN_IF_ERROR(
          client().mergePatch(resources::datasets(), ns, name, status, "status").status());
      manager.recorder().record(*object, kube::EventType::kNormal, "Ready", "marked ready");
      return kube::ReconcileResult::done();
    };
  }
};

TEST_F(ManagerContract, ReconcilesEveryObjectRecordsEventsAndServesEndpoints) {
  MetricsRegistry registry;
  auto manager = kube::Manager::create(
      client(), {.metricsAddress = "127.0.0.1:0", .component = "granary-test"}, registry);
  ASSERT_TRUE(manager.isOk()) << manager.status();
  auto& informer = (*manager)->informer({.type = resources::datasets(), .ns = ns()});
  std::atomic<int> calls{0};
  auto& controller = (*manager)->controller({.name = "dataset", .workers = 3},
                                            markReady(informer, **manager, calls));
  informer.addHandler(controller.enqueueObjects());

  const std::string base = "http://127.0.0.1:" + std::to_string((*manager)->metricsPort());
  std::string body;
  EXPECT_EQ(httpGet(base + "/readyz", body), 503) << "not running yet";

  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE(
        client().create(resources::datasets(), ns(), dataset("d" + std::to_string(i))).isOk());
  Running running([&](std::stop_token stop) { EXPECT_TRUE((*manager)->run(stop).isOk()); });

  const auto allReady = [&] {
    auto listed = client().list(resources::datasets(), ns());
    if (!listed.isOk() || listed->items.size() != 20) return false;
    for (const auto& item : listed->items) {
      const Json phase = kube::pathValue(item, "status.phase");
      if (!phase.is_string() || phase.as_string() != "Ready") return false;
    }
    return true;
  };
  ASSERT_TRUE(eventually(allReady, 60s));

  // The reconciler records its Event after the status it writes: the Event may come a moment
  // after the last Ready.
  Result<kube::ListResult> events = unavailable("not listed yet");
  ASSERT_TRUE(eventually(
      [&] {
        events =
            client().list(resources::events(), ns(), {.fieldSelector = "involvedObject.name=d7"});
        return events.isOk() && !events->items.empty();
      },
      30s))
      << (events.isOk() ? "no Event for d7" : events.status().toString());
  EXPECT_EQ(events->items[0].at("reason").as_string(), "Ready");
  EXPECT_EQ(events->items[0].at("source").at("component").as_string(), "granary-test");

  body.clear();
  EXPECT_EQ(httpGet(base + "/healthz", body), 200);
  body.clear();
  EXPECT_EQ(httpGet(base + "/readyz", body), 200) << body;
  body.clear();
  EXPECT_EQ(httpGet(base + "/metrics", body), 200);
  EXPECT_NE(
      body.find("granary_controller_reconciles_total{controller=\"dataset\",result=\"success\"}"),
      std::string::npos);
  EXPECT_NE(body.find("granary_workqueue_queue_duration_seconds_count{controller=\"dataset\"}"),
            std::string::npos);
  // Series a dashboard rates exist from the start, whether or not a watch ever restarted.
  for (const char* series : {"granary_informer_watch_restarts_total{resource=\"datasets\"}",
                             "granary_informer_relists_total{resource=\"datasets\"}",
                             "granary_workqueue_retries_total{controller=\"dataset\"}"})
    EXPECT_NE(body.find(series), std::string::npos) << series;

  running.stop();
  EXPECT_GE(calls.load(), 20);
}

// A controller that writes its object's status on every reconcile, as one does while it reports
// progress, does not hear of its own writes with enqueueOnChange: it reconciles once per change
// of the object itself, not in a loop fed by its own status.
TEST_F(ManagerContract, OwnStatusWritesDoNotComeBackWithEnqueueOnChange) {
  MetricsRegistry registry;
  auto manager = kube::Manager::create(client(), {.metricsAddress = ""}, registry);
  ASSERT_TRUE(manager.isOk()) << manager.status();
  auto& informer = (*manager)->informer({.type = resources::datasets(), .ns = ns()});
  std::atomic<int> calls{0};
  auto& controller = (*manager)->controller(
      {.name = "progress", .workers = 1},
      [&](const std::string& key, std::stop_token) -> Result<kube::ReconcileResult> {
        const auto [namespaceName, name] = kube::splitKey(key);
        Json patch = yaml("status: {phase: Warming}");
        patch["status"]["cachedBytes"] = Json::number(++calls);  // progress: always new
        GRANARY_RETURN_IF_ERROR(
            client()
                .mergePatch(resources::datasets(), namespaceName, name, patch, "status")
                .status());
        return kube::ReconcileResult::done();
      });
  informer.addHandler(controller.enqueueOnChange());
  ASSERT_TRUE(client().create(resources::datasets(), ns(), dataset("coco")).isOk());
  Running running([&](std::stop_token stop) { EXPECT_TRUE((*manager)->run(stop).isOk()); });
  ASSERT_TRUE(eventually([&] { return calls.load() >= 1; }, 20s));
  std::this_thread::sleep_for(1s);  // what its own writes would trigger, had they come back
  EXPECT_EQ(calls.load(), 1) << "reconciled again for its own status writes";
  ASSERT_TRUE(client()
                  .mergePatch(resources::datasets(), ns(), "coco",
                              yaml("metadata: {labels: {team: audio}}"))
                  .isOk());
  EXPECT_TRUE(eventually([&] { return calls.load() == 2; }, 20s)) << calls.load();
}

TEST_F(ManagerContract, FailuresAreRetriedWithBackoffUntilTheySucceed) {
  MetricsRegistry registry;
  auto manager = kube::Manager::create(client(), {.metricsAddress = ""}, registry);
  ASSERT_TRUE(manager.isOk()) << manager.status();
  auto& informer = (*manager)->informer({.type = resources::datasets(), .ns = ns()});
  std::atomic<int> attempts{0};
  std::atomic<bool> succeeded{false};
  auto& controller = (*manager)->controller(
      {.name = "flaky", .workers = 1},
      [&](const std::string&, std::stop_token) -> Result<kube::ReconcileResult> {
        if (++attempts < 4) return unavailable("origin is down");
        succeeded = true;
        return kube::ReconcileResult::done();
      });
  informer.addHandler(controller.enqueueObjects());
  ASSERT_TRUE(client().create(resources::datasets(), ns(), dataset("flaky")).isOk());
  Running running([&](std::stop_token stop) { (void)(*manager)->run(stop); });
  ASSERT_TRUE(eventually([&] { return succeeded.load(); }, 30s));
  EXPECT_EQ(attempts.load(), 4);
  EXPECT_EQ(controller.queue().failures(ns() + "/flaky"), 0) << "forgotten after success";
}

class LeaderElectionContract : public ManagerContract {
 protected:
  kube::LeaderElectionOptions lease(const std::string& identity) {
    return {.ns = ns(),
            .name = "granary-test-lock",
            .identity = identity,
            .leaseDuration = 3s,
            .renewDeadline = 2s,
            .retryPeriod = 200ms};
  }
};

TEST_F(LeaderElectionContract, OneLeaderAtATimeAndHandOverOnRelease) {
  MetricsRegistry registryA, registryB;
  auto a = kube::Manager::create(client(), {.metricsAddress = "", .leaderElection = lease("a")},
                                 registryA);
  auto b = kube::Manager::create(client(), {.metricsAddress = "", .leaderElection = lease("b")},
                                 registryB);
  ASSERT_TRUE(a.isOk() && b.isOk());
  Running runA([&](std::stop_token stop) { EXPECT_TRUE((*a)->run(stop).isOk()); });
  ASSERT_TRUE(eventually([&] { return (*a)->leading(); }, 10s));
  Running runB([&](std::stop_token stop) { EXPECT_TRUE((*b)->run(stop).isOk()); });

  // b campaigns but a holds the lease.
  ASSERT_TRUE(eventually([&] { return (*b)->healthy().isOk(); }, 5s));
  EXPECT_FALSE((*b)->leading());
  EXPECT_TRUE((*b)->ready().isOk()) << "a standby is ready to take over: " << (*b)->ready();

  const auto released = std::chrono::steady_clock::now();
  runA.stop();
  ASSERT_TRUE(eventually([&] { return (*b)->leading(); }, 10s));
  const auto handOver = std::chrono::steady_clock::now() - released;
  EXPECT_LT(handOver, 3s) << "a released lease is taken without waiting for it to expire";

  auto held = client().get(resources::leases(), ns(), "granary-test-lock");
  ASSERT_TRUE(held.isOk());
  EXPECT_EQ(held->at("spec").at("holderIdentity").as_string(), "b");
  EXPECT_EQ(held->at("spec").at("leaseTransitions").as_integer(), 1);
}

TEST_F(LeaderElectionContract, LosingTheLeaseStopsTheControllers) {
  MetricsRegistry registry;
  auto manager = kube::Manager::create(
      client(), {.metricsAddress = "", .leaderElection = lease("a")}, registry);
  ASSERT_TRUE(manager.isOk());
  auto& informer = (*manager)->informer({.type = resources::datasets(), .ns = ns()});
  std::atomic<int> calls{0};
  auto& controller = (*manager)->controller(
      {.name = "counting"},
      [&](const std::string&, std::stop_token) -> Result<kube::ReconcileResult> {
        ++calls;
        return kube::ReconcileResult::done();
      });
  informer.addHandler(controller.enqueueObjects());
  Status result;
  Running running([&](std::stop_token stop) { result = (*manager)->run(stop); });
  ASSERT_TRUE(eventually([&] { return (*manager)->leading(); }, 10s));

  // Another process takes the lease over.
  auto held = client().get(resources::leases(), ns(), "granary-test-lock");
  ASSERT_TRUE(held.isOk());
  Json stolen = *held;
  stolen["spec"]["holderIdentity"] = Json::string("intruder");
  ASSERT_TRUE(client().update(resources::leases(), stolen).isOk());

  running.join();  // run() returns by itself: the stop token was never used
  EXPECT_EQ(result.code(), StatusCode::kFailedPrecondition) << result;
  EXPECT_FALSE((*manager)->leading());
  const int before = calls;
  ASSERT_TRUE(client().create(resources::datasets(), ns(), dataset("after-loss")).isOk());
  EXPECT_EQ(calls.load(), before) << "no reconcile after leadership is lost";
}

}  // namespace
}  // namespace granary::testing
