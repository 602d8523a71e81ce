// planJob, the TrainingJob lifecycle, as a pure function: each test builds what the controller
// would observe and checks the plan (workers to create and delete, the status, the deadlines).
// A test that spans reconciles feeds each plan's status into the next observation, as the
// controller does through the API server.
#include "operator/core/job_lifecycle.h"

#include <gtest/gtest.h>

#include "operator/core/conditions.h"

namespace granary::op {
namespace {

using kube::Json;
using Phase = WorkerState::Phase;
using namespace std::chrono_literals;

const WallTime kCreated = WallTime(std::chrono::seconds(1'800'000'000));

api::TrainingJobSpec twoWorkers() {
  api::TrainingJobSpec spec;
  spec.workers = 2;
  spec.datasets = {{.name = "wiki", .mountPath = "/data"}};
  return spec;
}

WorkerState worker(int rank, Phase phase, int attempt = 0) {
  return WorkerState{.name = "bert-worker-" + std::to_string(rank),
                     .uid = "uid-" + std::to_string(rank) + "-" + std::to_string(attempt),
                     .rank = rank,
                     .attempt = attempt,
                     .phase = phase,
                     .ready = phase == Phase::kRunning,
                     .node = "n1",
                     .created = kCreated + 1s};
}

// Dataset wiki in status.phase `phase`, warmed by `warm` (spec.cache.warm).
DatasetState dataset(const std::string& phase, api::WarmPolicy warm = api::WarmPolicy::kOnCreate) {
  return DatasetState{.name = "wiki",
                      .exists = true,
                      .phase = api::datasetPhaseOf(phase),
                      .warm = warm,
                      .totalBytes = 100};
}

JobObservation observe(api::TrainingJobSpec spec, std::vector<WorkerState> workers,
                       Json previous = Json(), WallTime now = kCreated + 10s,
                       DatasetState data = dataset("Ready")) {
  return JobObservation{.spec = std::move(spec),
                        .previousStatus = std::move(previous),
                        .workers = std::move(workers),
                        .datasets = {std::move(data)},
                        .created = kCreated,
                        .now = now};
}

std::string phaseOf(const JobPlan& plan) { return plan.status.at("phase").as_string(); }
int64_t field(const JobPlan& plan, const std::string& path) {
  const Json v = kube::pathValue(plan.status, path);
  return v.is_integer() ? v.as_number().to_int64() : -1;
}
std::vector<std::string> names(std::initializer_list<int> ranks) {
  std::vector<std::string> out;
  for (int rank : ranks) out.push_back("bert-worker-" + std::to_string(rank));
  return out;
}

// The status of a gang whose workers all run (attempt `attempt`), as planJob wrote it.
Json runningStatus(const api::TrainingJobSpec& spec, int attempt = 0) {
  JobPlan created = planJob(observe(spec, {}));
  if (attempt > 0) created.status["restarts"] = Json::number(attempt);
  std::vector<WorkerState> running;
  for (int rank = 0; rank < spec.workers; ++rank)
    running.push_back(worker(rank, Phase::kRunning, attempt));
  return planJob(observe(spec, running, created.status)).status;
}

TEST(JobLifecycleTest, CreatesEveryRankOnceTheDatasetsExistAndWaitsForThemToRun) {
  const JobPlan plan = planJob(observe(twoWorkers(), {}));
  EXPECT_EQ(plan.create, (std::vector<int>{0, 1}));
  EXPECT_EQ(phaseOf(plan), "Pending");
  EXPECT_TRUE(conditionOf(plan.status, "Created").status);
  // startDeadlineSeconds (600) counts from the job's creation, 10 s ago.
  EXPECT_EQ(plan.requeueAfter, std::optional<std::chrono::seconds>(590s));
}

TEST(JobLifecycleTest, AMissingDatasetHoldsTheWorkersBackAndSaysSo) {
  const JobPlan plan =
      planJob(observe(twoWorkers(), {}, Json(), kCreated + 10s, DatasetState{.name = "wiki"}));
  EXPECT_TRUE(plan.create.empty());
  EXPECT_EQ(phaseOf(plan), "Pending");
  EXPECT_EQ(conditionOf(plan.status, "DatasetsReady").reason, "DatasetNotFound");
  ASSERT_EQ(plan.events.size(), 1u);
  EXPECT_TRUE(plan.events[0].warning);
}

TEST(JobLifecycleTest, BeforeStartIsWarmingUntilTheDatasetsAreReadyParallelStartsAtOnce) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.warmPolicy = api::WarmStart::kBeforeStart;
  const JobPlan waiting = planJob(observe(spec, {}, Json(), kCreated + 10s, dataset("Warming")));
  EXPECT_TRUE(waiting.create.empty());
  EXPECT_EQ(phaseOf(waiting), "Warming");
  EXPECT_EQ(conditionOf(waiting.status, "Running").reason, "WaitingForDatasets");
  EXPECT_NE(conditionOf(waiting.status, "Running").message.find("wiki"), std::string::npos);

  const JobPlan ready = planJob(observe(spec, {}, waiting.status));
  EXPECT_EQ(ready.create, (std::vector<int>{0, 1}));
  EXPECT_EQ(phaseOf(ready), "Pending");

  const JobPlan parallel =
      planJob(observe(twoWorkers(), {}, Json(), kCreated + 10s, dataset("Warming")));
  EXPECT_EQ(parallel.create, (std::vector<int>{0, 1}));
  EXPECT_EQ(phaseOf(parallel), "Pending") << "Parallel never waits for warming";
}

api::TrainingJobSpec beforeStart() {
  api::TrainingJobSpec spec = twoWorkers();
  spec.warmPolicy = api::WarmStart::kBeforeStart;
  return spec;
}

TEST(JobLifecycleTest, BeforeStartWaitsForAnOnJobDatasetOnDemandItWillWarmForTheJob) {
  const JobPlan plan = planJob(observe(beforeStart(), {}, Json(), kCreated + 10s,
                                       dataset("OnDemand", api::WarmPolicy::kOnJob)));
  EXPECT_TRUE(plan.create.empty()) << "the job is the reader that warms it: wait";
  EXPECT_EQ(phaseOf(plan), "Warming");
  const Condition ready = conditionOf(plan.status, "DatasetsReady");
  EXPECT_FALSE(ready.status);
  EXPECT_EQ(ready.reason, "Warming");
}

TEST(JobLifecycleTest, BeforeStartStartsWithADatasetNeverWarmedAndSaysItIsNotCached) {
  const JobPlan plan = planJob(observe(beforeStart(), {}, Json(), kCreated + 10s,
                                       dataset("OnDemand", api::WarmPolicy::kNever)));
  EXPECT_EQ(plan.create, (std::vector<int>{0, 1})) << "nothing will warm it: no reason to wait";
  EXPECT_EQ(phaseOf(plan), "Pending");
  const Condition ready = conditionOf(plan.status, "DatasetsReady");
  EXPECT_TRUE(ready.status);
  EXPECT_EQ(ready.reason, "NotWarmedByPolicy");
  EXPECT_NE(ready.message.find("wiki"), std::string::npos) << ready.message;
  EXPECT_NE(ready.message.find("spec.cache.warm Never"), std::string::npos) << ready.message;
  EXPECT_EQ(ready.message.find("every dataset is cached"), std::string::npos) << ready.message;
}

TEST(JobLifecycleTest, BeforeStartStartsWithAQuotaFullDatasetAndSaysItIsPartlyCached) {
  const JobPlan plan =
      planJob(observe(beforeStart(), {}, Json(), kCreated + 10s, dataset("QuotaFull")));
  EXPECT_EQ(plan.create, (std::vector<int>{0, 1})) << "what fits is cached: start";
  const Condition ready = conditionOf(plan.status, "DatasetsReady");
  EXPECT_TRUE(ready.status);
  EXPECT_EQ(ready.reason, "CacheQuotaFull");
  EXPECT_NE(ready.message.find("wiki"), std::string::npos) << ready.message;
}

TEST(JobLifecycleTest, BeforeStartStartsOnceEveryDatasetIsReadyOrSettledAndNamesEachUncached) {
  api::TrainingJobSpec spec = beforeStart();
  spec.datasets = {{.name = "wiki"}, {.name = "books"}, {.name = "code"}};
  JobObservation o = observe(spec, {});
  o.datasets = {dataset("Ready"), dataset("QuotaFull"),
                dataset("OnDemand", api::WarmPolicy::kNever)};
  o.datasets[1].name = "books";
  o.datasets[2].name = "code";
  const JobPlan settled = planJob(o);
  EXPECT_EQ(settled.create, (std::vector<int>{0, 1}));
  const Condition ready = conditionOf(settled.status, "DatasetsReady");
  EXPECT_EQ(ready.reason, "NotFullyCached");
  EXPECT_NE(ready.message.find("books"), std::string::npos) << ready.message;
  EXPECT_NE(ready.message.find("code"), std::string::npos) << ready.message;
  EXPECT_EQ(ready.message.find("wiki"), std::string::npos) << "wiki is cached: " << ready.message;

  const JobPlan allReady = planJob(observe(beforeStart(), {}));
  EXPECT_EQ(allReady.create, (std::vector<int>{0, 1}));
  EXPECT_EQ(conditionOf(allReady.status, "DatasetsReady").reason, "Ready");

  o.datasets[2] = dataset("OnDemand", api::WarmPolicy::kOnJob);
  o.datasets[2].name = "code";
  EXPECT_TRUE(planJob(o).create.empty()) << "code, OnJob, still warms for the job";
}

TEST(JobLifecycleTest, EveryWorkerRunningIsRunningWithAStartTime) {
  const Json status = runningStatus(twoWorkers());
  EXPECT_EQ(status.at("phase").as_string(), "Running");
  EXPECT_EQ(status.at("startTime").as_string(), kube::metav1Time(kCreated + 10s));
  EXPECT_EQ(kube::pathValue(status, "workers.ready").as_integer(), 2);
  EXPECT_EQ(kube::pathValue(status, "workers.active").as_integer(), 2);
}

TEST(JobLifecycleTest, AFailedWorkerRestartsTheWholeGangUpToTheBackoffLimit) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.runPolicy.backoffLimit = 1;
  const JobPlan restart = planJob(
      observe(spec, {worker(0, Phase::kRunning), worker(1, Phase::kFailed)}, runningStatus(spec)));
  EXPECT_EQ(restart.remove, names({0, 1}));
  EXPECT_TRUE(restart.create.empty()) << "the old attempt goes first";
  EXPECT_EQ(phaseOf(restart), "Restarting");
  EXPECT_EQ(field(restart, "restarts"), 1);
  EXPECT_EQ(conditionOf(restart.status, "Restarting").reason, "WorkerFailed");
  EXPECT_EQ(field(restart, "workers.active"), 0) << "the counts are the new attempt's";

  // The old attempt's pods are gone: the new one is created, and nothing reads as lost.
  const JobPlan recreate = planJob(observe(spec, {}, restart.status));
  EXPECT_EQ(recreate.create, (std::vector<int>{0, 1}));
  EXPECT_EQ(phaseOf(recreate), "Restarting");

  const JobPlan failed = planJob(observe(
      spec, {worker(0, Phase::kFailed, 1), worker(1, Phase::kRunning, 1)}, recreate.status));
  EXPECT_EQ(phaseOf(failed), "Failed");
  EXPECT_EQ(conditionOf(failed.status, "Failed").reason, "BackoffLimitExceeded");
  EXPECT_EQ(failed.remove, names({1})) << "cleanPodPolicy Running keeps the failed worker";
}

TEST(JobLifecycleTest, TheWorkersKeepTheDatasetVersionTheyFirstReadThroughGangRestarts) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.runPolicy.backoffLimit = 3;
  DatasetState v1 = dataset("Ready");
  v1.version = 1;
  const JobPlan created = planJob(observe(spec, {}, Json(), kCreated + 10s, v1));
  EXPECT_EQ(created.create, (std::vector<int>{0, 1}));
  EXPECT_EQ(field(created, "datasetVersions.wiki"), 1);

  // The dataset was refreshed to version 2 meanwhile; the gang restarts on version 1.
  DatasetState v2 = v1;
  v2.version = 2;
  const JobPlan running =
      planJob(observe(spec, {worker(0, Phase::kRunning), worker(1, Phase::kRunning)},
                      created.status, kCreated + 20s, v2));
  const JobPlan restart =
      planJob(observe(spec, {worker(0, Phase::kRunning), worker(1, Phase::kFailed)}, running.status,
                      kCreated + 30s, v2));
  const JobPlan recreate = planJob(observe(spec, {}, restart.status, kCreated + 40s, v2));
  EXPECT_EQ(recreate.create, (std::vector<int>{0, 1}));
  EXPECT_EQ(field(recreate, "datasetVersions.wiki"), 1);

  // A new job reads the newest version.
  EXPECT_EQ(field(planJob(observe(spec, {}, Json(), kCreated + 50s, v2)), "datasetVersions.wiki"),
            2);
}

TEST(JobLifecycleTest, ExitCodeRestartsOnlyTheKilledAndNeverRestartsNothing) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.runPolicy.restartPolicy = api::RestartPolicy::kExitCode;
  WorkerState crashed = worker(1, Phase::kFailed);
  crashed.exitCode = 1;
  const JobPlan failed =
      planJob(observe(spec, {worker(0, Phase::kRunning), crashed}, runningStatus(spec)));
  EXPECT_EQ(phaseOf(failed), "Failed");
  EXPECT_EQ(conditionOf(failed.status, "Failed").reason, "WorkerFailed");

  WorkerState killed = worker(1, Phase::kFailed);
  killed.exitCode = 137;
  EXPECT_EQ(
      phaseOf(planJob(observe(spec, {worker(0, Phase::kRunning), killed}, runningStatus(spec)))),
      "Restarting");

  spec.runPolicy.restartPolicy = api::RestartPolicy::kNever;
  EXPECT_EQ(
      phaseOf(planJob(observe(spec, {worker(0, Phase::kRunning), killed}, runningStatus(spec)))),
      "Failed");
}

TEST(JobLifecycleTest, ADeletedWorkerRestartsTheGangInsteadOfBeingRecreatedAlone) {
  const api::TrainingJobSpec spec = twoWorkers();
  const JobPlan plan = planJob(observe(spec, {worker(0, Phase::kRunning)}, runningStatus(spec)));
  EXPECT_TRUE(plan.create.empty()) << "rank 1 alone would join a rendezvous that is gone";
  EXPECT_EQ(plan.remove, names({0}));
  EXPECT_EQ(phaseOf(plan), "Restarting");
  EXPECT_EQ(field(plan, "restarts"), 1);
  const Condition restarting = conditionOf(plan.status, "Restarting");
  EXPECT_EQ(restarting.reason, "WorkerLost");
  EXPECT_NE(restarting.message.find("worker 1 was deleted"), std::string::npos)
      << restarting.message;
}

TEST(JobLifecycleTest, AWorkerBeingDeletedOrOnAnUnreachableNodeIsLost) {
  const api::TrainingJobSpec spec = twoWorkers();
  WorkerState deleting = worker(1, Phase::kRunning);
  deleting.deleting = true;
  const JobPlan deleted =
      planJob(observe(spec, {worker(0, Phase::kRunning), deleting}, runningStatus(spec)));
  EXPECT_EQ(conditionOf(deleted.status, "Restarting").reason, "WorkerLost");
  EXPECT_EQ(field(deleted, "restarts"), 1);

  const JobPlan unreachable = planJob(
      observe(spec, {worker(0, Phase::kRunning), worker(1, Phase::kUnknown)}, runningStatus(spec)));
  EXPECT_EQ(conditionOf(unreachable.status, "Restarting").reason, "WorkerLost");
  EXPECT_EQ(unreachable.remove, names({0, 1}));
}

// A worker whose Node is not Ready is lost once kNodeLostAfter passed, not before (the planner
// asks to look again then); its pod is deleted without grace, as is one whose graceful deletion
// began before: no kubelet is there to finish it.
TEST(JobLifecycleTest, AWorkerOnANodeNotReadyForLongIsLostAndDeletedWithoutGrace) {
  const api::TrainingJobSpec spec = twoWorkers();
  const WallTime now = kCreated + 100s;
  WorkerState cutOff = worker(1, Phase::kRunning);
  cutOff.nodeNotReadySince = now - 10s;
  const JobPlan early =
      planJob(observe(spec, {worker(0, Phase::kRunning), cutOff}, runningStatus(spec), now));
  EXPECT_EQ(phaseOf(early), "Running");
  EXPECT_TRUE(early.remove.empty() && early.removeNow.empty());
  EXPECT_EQ(early.requeueAfter, kNodeLostAfter - 10s);

  cutOff.nodeNotReadySince = now - kNodeLostAfter;
  const JobPlan lost =
      planJob(observe(spec, {worker(0, Phase::kRunning), cutOff}, runningStatus(spec), now));
  EXPECT_EQ(phaseOf(lost), "Restarting");
  const Condition restarting = conditionOf(lost.status, "Restarting");
  EXPECT_EQ(restarting.reason, "WorkerLost");
  EXPECT_NE(restarting.message.find("worker 1's node n1 is not Ready"), std::string::npos)
      << restarting.message;
  EXPECT_EQ(lost.remove, names({0})) << "a worker on a Ready node goes gracefully";
  EXPECT_EQ(lost.removeNow, names({1}));

  // The gang's old pod on the lost node is still there, its deletion begun: deleted again, now.
  WorkerState stuck = cutOff;
  stuck.deleting = true;
  const JobPlan again = planJob(observe(spec, {stuck}, lost.status, now + 1s));
  EXPECT_EQ(again.removeNow, names({1}));

  WorkerState finished = worker(1, Phase::kSucceeded);
  finished.nodeNotReadySince = now - kNodeLostAfter;
  const JobPlan done =
      planJob(observe(spec, {worker(0, Phase::kRunning), finished}, runningStatus(spec), now));
  EXPECT_TRUE(done.removeNow.empty()) << "a worker that finished is not lost with its node";
  EXPECT_NE(phaseOf(done), "Restarting");
}

TEST(JobLifecycleTest, ALostWorkerCountsAgainstTheBackoffLimitAndFailsUnderNever) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.runPolicy.backoffLimit = 0;
  const JobPlan limit = planJob(observe(spec, {worker(0, Phase::kRunning)}, runningStatus(spec)));
  EXPECT_EQ(phaseOf(limit), "Failed");
  EXPECT_EQ(conditionOf(limit.status, "Failed").reason, "BackoffLimitExceeded");

  spec.runPolicy.backoffLimit = 3;
  spec.runPolicy.restartPolicy = api::RestartPolicy::kNever;
  const JobPlan never = planJob(observe(spec, {worker(0, Phase::kRunning)}, runningStatus(spec)));
  EXPECT_EQ(phaseOf(never), "Failed");
  EXPECT_EQ(conditionOf(never.status, "Failed").reason, "WorkerLost");
}

// A running worker whose view of a dataset ended reads nothing but errors until it restarts: the
// gang restarts, as after a disruption, and the backoff limit is not spent; a worker that already
// finished is left alone.
TEST(JobLifecycleTest, AWorkerCutOffFromItsDatasetRestartsTheGangWithoutSpendingTheBackoffLimit) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.runPolicy.backoffLimit = 0;
  WorkerState cutOff = worker(1, Phase::kRunning);
  cutOff.mountLost = "Dataset ml/coco on node gpu-1 since 2026-11-28T10:00:00Z";
  const JobPlan restart =
      planJob(observe(spec, {worker(0, Phase::kRunning), cutOff}, runningStatus(spec)));
  EXPECT_EQ(phaseOf(restart), "Restarting");
  EXPECT_EQ(field(restart, "restarts"), 1);
  EXPECT_EQ(field(restart, "disruptions"), 1);
  EXPECT_EQ(restart.remove, names({0, 1}));
  const Condition restarting = conditionOf(restart.status, "Restarting");
  EXPECT_EQ(restarting.reason, "WorkerMountLost");
  EXPECT_NE(restarting.message.find("worker 1 lost its view of Dataset ml/coco on node gpu-1"),
            std::string::npos)
      << restarting.message;

  WorkerState done = worker(1, Phase::kSucceeded);
  done.mountLost = cutOff.mountLost;
  const JobPlan finished =
      planJob(observe(spec, {worker(0, Phase::kRunning), done}, runningStatus(spec)));
  EXPECT_NE(phaseOf(finished), "Restarting");
}

TEST(JobLifecycleTest, AnEvictedWorkerRestartsTheGangWithoutSpendingTheBackoffLimit) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.runPolicy.backoffLimit = 0;
  spec.runPolicy.restartPolicy = api::RestartPolicy::kNever;
  WorkerState evicted = worker(1, Phase::kFailed);
  evicted.disrupted = true;
  const JobPlan restart =
      planJob(observe(spec, {worker(0, Phase::kRunning), evicted}, runningStatus(spec)));
  EXPECT_EQ(phaseOf(restart), "Restarting");
  EXPECT_EQ(field(restart, "restarts"), 1);
  EXPECT_EQ(field(restart, "disruptions"), 1);
  const Condition restarting = conditionOf(restart.status, "Restarting");
  EXPECT_EQ(restarting.reason, "WorkerDisrupted");
  EXPECT_NE(restarting.message.find("not counted"), std::string::npos) << restarting.message;

  // A disruption of a pod still running (preemption announced) restarts too.
  WorkerState preempted = worker(0, Phase::kRunning, 1);
  preempted.disrupted = true;
  const JobPlan again =
      planJob(observe(spec, {preempted, worker(1, Phase::kRunning, 1)}, runningStatus(spec, 1)));
  EXPECT_EQ(field(again, "restarts"), 2);
  EXPECT_EQ(field(again, "disruptions"), 1) << "status.disruptions of attempt 1's status was 0";

  // A real failure after a disruption still meets backoffLimit 0.
  spec.runPolicy.restartPolicy = api::RestartPolicy::kOnFailure;
  Json status = runningStatus(spec, 1);
  status["disruptions"] = Json::number(1);
  const JobPlan failed =
      planJob(observe(spec, {worker(0, Phase::kFailed, 1), worker(1, Phase::kRunning, 1)}, status));
  EXPECT_EQ(phaseOf(failed), "Failed");
  EXPECT_EQ(conditionOf(failed.status, "Failed").reason, "BackoffLimitExceeded");
}

TEST(JobLifecycleTest, ActiveDeadlineSecondsCountsFromTheStartAndFailsTheJob) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.runPolicy.activeDeadlineSeconds = 60;
  const Json status = runningStatus(spec);  // started at kCreated + 10 s
  const std::vector<WorkerState> running = {worker(0, Phase::kRunning), worker(1, Phase::kRunning)};
  const JobPlan before = planJob(observe(spec, running, status, kCreated + 40s));
  EXPECT_EQ(phaseOf(before), "Running");
  EXPECT_EQ(before.requeueAfter, std::optional<std::chrono::seconds>(30s));

  const JobPlan after = planJob(observe(spec, running, status, kCreated + 70s));
  EXPECT_EQ(phaseOf(after), "Failed");
  EXPECT_EQ(conditionOf(after.status, "Failed").reason, "DeadlineExceeded");
  EXPECT_EQ(after.remove, names({0, 1}));
  EXPECT_EQ(after.status.at("completionTime").as_string(), kube::metav1Time(kCreated + 70s));
}

TEST(JobLifecycleTest, TtlSecondsAfterFinishedDeletesTheJobOnceItPassed) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.runPolicy.ttlSecondsAfterFinished = 100;
  const std::vector<WorkerState> done = {worker(0, Phase::kSucceeded),
                                         worker(1, Phase::kSucceeded)};
  const JobPlan finished = planJob(observe(spec, done, runningStatus(spec), kCreated + 20s));
  ASSERT_EQ(phaseOf(finished), "Succeeded");
  EXPECT_FALSE(finished.deleteJob);

  const JobPlan waiting = planJob(observe(spec, done, finished.status, kCreated + 50s));
  EXPECT_FALSE(waiting.deleteJob);
  EXPECT_EQ(waiting.requeueAfter, std::optional<std::chrono::seconds>(70s));
  EXPECT_TRUE(planJob(observe(spec, done, finished.status, kCreated + 120s)).deleteJob);

  spec.runPolicy.ttlSecondsAfterFinished.reset();
  EXPECT_FALSE(planJob(observe(spec, done, finished.status, kCreated + 10'000s)).deleteJob);
}

TEST(JobLifecycleTest, CleanPodPolicyChoosesTheWorkersDeletedWhenTheJobEnds) {
  const std::vector<WorkerState> ended = {worker(0, Phase::kRunning), worker(1, Phase::kFailed)};
  const auto removedWith = [&](api::CleanPodPolicy policy) {
    api::TrainingJobSpec spec = twoWorkers();
    spec.runPolicy.backoffLimit = 0;
    spec.runPolicy.cleanPodPolicy = policy;
    const JobPlan plan = planJob(observe(spec, ended, runningStatus(spec)));
    EXPECT_EQ(phaseOf(plan), "Failed");
    return plan.remove;
  };
  EXPECT_EQ(removedWith(api::CleanPodPolicy::kRunning), names({0}));
  EXPECT_EQ(removedWith(api::CleanPodPolicy::kAll), names({0, 1}));
  EXPECT_TRUE(removedWith(api::CleanPodPolicy::kNone).empty());
}

TEST(JobLifecycleTest, SuspendDeletesEveryWorkerAndResumeCreatesThemAgain) {
  api::TrainingJobSpec spec = twoWorkers();
  spec.suspend = true;
  const std::vector<WorkerState> running = {worker(0, Phase::kRunning), worker(1, Phase::kRunning)};
  const JobPlan suspended = planJob(observe(spec, running, runningStatus(spec)));
  EXPECT_EQ(phaseOf(suspended), "Suspended");
  EXPECT_EQ(suspended.remove, names({0, 1}));
  EXPECT_EQ(field(suspended, "restarts"), 0) << "suspending is not a restart";

  spec.suspend = false;
  const JobPlan resumed = planJob(observe(spec, {}, suspended.status, kCreated + 20s));
  EXPECT_EQ(resumed.create, (std::vector<int>{0, 1}));
  EXPECT_FALSE(conditionOf(resumed.status, "Suspended").status);
  EXPECT_EQ(field(resumed, "restarts"), 0) << "no worker reads as lost after a resume";
}

api::TrainingJobSpec elasticThree(int backoffLimit = 3) {
  api::TrainingJobSpec spec;
  spec.workers = 3;
  spec.elastic = api::ElasticPolicy{.minWorkers = 2, .maxWorkers = 3};
  spec.runPolicy.backoffLimit = backoffLimit;
  spec.datasets = {{.name = "wiki", .mountPath = "/data"}};
  return spec;
}

JobObservation observeElastic(const api::TrainingJobSpec& spec, std::vector<WorkerState> workers,
                              Json previous, WallTime now) {
  JobObservation o = observe(spec, std::move(workers), std::move(previous), now);
  o.jobName = "bert";
  return o;
}

std::string changeKinds(const JobPlan& plan) {
  std::string kinds;
  const Json changes = kube::pathValue(plan.status, "elastic.changes");
  for (const auto& c : changes.as_array()) kinds += c.at("kind").as_string() + " ";
  return kinds;
}

// A lost worker of an elastic job with minWorkers left: its pod alone is deleted and created again
// once gone; the others' pods are never touched; the job stays Running; each change is recorded.
TEST(JobLifecycleTest, AnElasticJobReplacesALostWorkerAloneWhileMinWorkersRemain) {
  const api::TrainingJobSpec spec = elasticThree();
  const Json running = runningStatus(spec);
  WorkerState failed = worker(1, Phase::kFailed);
  failed.exitCode = 137;
  const JobPlan lost =
      planJob(observeElastic(spec, {worker(0, Phase::kRunning), failed, worker(2, Phase::kRunning)},
                             running, kCreated + 20s));
  EXPECT_EQ(lost.remove, names({1})) << "no surviving worker's pod is deleted";
  EXPECT_TRUE(lost.create.empty()) << "the lost pod goes first";
  EXPECT_EQ(phaseOf(lost), "Running");
  EXPECT_EQ(field(lost, "restarts"), 0) << "no gang restart: the attempt stays";
  EXPECT_EQ(field(lost, "elastic.replacements"), 1);
  EXPECT_EQ(changeKinds(lost), "Lost ");
  const Json change = kube::pathValue(lost.status, "elastic.changes").at(0);
  EXPECT_EQ(change.at("worker").as_string(), "bert-worker-1");
  EXPECT_EQ(change.at("cause").as_string(), "worker 1 failed with exit code 137");
  EXPECT_EQ(change.at("running").as_integer(), 2);
  ASSERT_EQ(lost.events.size(), 1u);
  EXPECT_EQ(lost.events[0].reason, "WorkerLost");
  EXPECT_EQ(lost.goneFromRendezvous, names({1})) << "the store is told at once";

  // Being deleted, the old pod is neither a new loss nor replaced under its own name yet.
  failed.deleting = true;
  const JobPlan deleting =
      planJob(observeElastic(spec, {worker(0, Phase::kRunning), failed, worker(2, Phase::kRunning)},
                             lost.status, kCreated + 21s));
  EXPECT_TRUE(deleting.remove.empty());
  EXPECT_TRUE(deleting.create.empty());
  EXPECT_TRUE(deleting.goneFromRendezvous.empty()) << "told once";
  EXPECT_EQ(field(deleting, "elastic.membershipChanges"), 1);
  EXPECT_EQ(phaseOf(deleting), "Running");

  const JobPlan gone =
      planJob(observeElastic(spec, {worker(0, Phase::kRunning), worker(2, Phase::kRunning)},
                             deleting.status, kCreated + 22s));
  EXPECT_EQ(gone.create, (std::vector<int>{1}));
  EXPECT_TRUE(gone.remove.empty());

  WorkerState replacement = worker(1, Phase::kRunning);
  replacement.uid = "uid-1-replacement";
  const JobPlan joined = planJob(
      observeElastic(spec, {worker(0, Phase::kRunning), replacement, worker(2, Phase::kRunning)},
                     gone.status, kCreated + 30s));
  EXPECT_EQ(changeKinds(joined), "Lost Joined ");
  EXPECT_EQ(lost.membershipChanges, (std::vector<std::string>{"Lost"}));
  EXPECT_EQ(joined.membershipChanges, (std::vector<std::string>{"Joined"}));
  EXPECT_EQ(joined.recoverySeconds, (std::vector<double>{10})) << "lost at 20 s, running at 30 s";
  EXPECT_TRUE(gone.membershipChanges.empty());
  EXPECT_EQ(field(joined, "elastic.running"), 3);
  EXPECT_EQ(kube::pathValue(joined.status, "elastic.secondsBelowWanted").as_double(), 10)
      << "below 3 workers from the loss (20 s) to the join (30 s)";
  EXPECT_EQ(conditionOf(joined.status, "Running").message, "every worker is running");
}

// An elastic job's worker on a lost node is replaced alone: its pod deleted without grace (again
// while it lingers), the replacement created once the name is free.
TEST(JobLifecycleTest, AnElasticJobReplacesAWorkerOnALostNodeWithoutWaitingForItsKubelet) {
  const api::TrainingJobSpec spec = elasticThree();
  const WallTime now = kCreated + 100s;
  WorkerState cutOff = worker(1, Phase::kRunning);
  cutOff.nodeNotReadySince = now - kNodeLostAfter - 5s;
  const JobPlan lost =
      planJob(observeElastic(spec, {worker(0, Phase::kRunning), cutOff, worker(2, Phase::kRunning)},
                             runningStatus(spec), now));
  EXPECT_TRUE(lost.remove.empty()) << "no surviving worker's pod is deleted";
  EXPECT_EQ(lost.removeNow, names({1}));
  EXPECT_EQ(phaseOf(lost), "Running");
  EXPECT_EQ(changeKinds(lost), "Lost ");

  cutOff.deleting = true;
  const JobPlan lingering =
      planJob(observeElastic(spec, {worker(0, Phase::kRunning), cutOff, worker(2, Phase::kRunning)},
                             lost.status, now + 1s));
  EXPECT_EQ(lingering.removeNow, names({1}));
  EXPECT_TRUE(lingering.create.empty());
  EXPECT_EQ(field(lingering, "elastic.membershipChanges"), 1) << "one loss, counted once";

  const JobPlan gone = planJob(observeElastic(
      spec, {worker(0, Phase::kRunning), worker(2, Phase::kRunning)}, lingering.status, now + 2s));
  EXPECT_EQ(gone.create, (std::vector<int>{1}));
}

// Below minWorkers an elastic job restarts the gang as a fixed one does; replacements spent the
// same backoffLimit; with none left, a lost worker's rank stays vacant and the rest go on.
TEST(JobLifecycleTest, AnElasticJobBelowMinWorkersRestartsTheGangAndSpendsOneBackoffLimit) {
  const api::TrainingJobSpec spec = elasticThree(1);
  const JobPlan restart = planJob(observeElastic(
      spec, {worker(0, Phase::kRunning), worker(1, Phase::kFailed), worker(2, Phase::kFailed)},
      runningStatus(spec), kCreated + 20s));
  EXPECT_EQ(restart.remove, names({0, 1, 2}));
  EXPECT_EQ(field(restart, "restarts"), 1);
  EXPECT_EQ(phaseOf(restart), "Restarting");
  EXPECT_EQ(changeKinds(restart), "GangRestart ");

  const Json again = runningStatus(spec, 1);
  const JobPlan vacant = planJob(observeElastic(
      spec,
      {worker(0, Phase::kRunning, 1), worker(1, Phase::kRunning, 1), worker(2, Phase::kFailed, 1)},
      again, kCreated + 40s));
  EXPECT_EQ(vacant.remove, names({2}));
  EXPECT_EQ(phaseOf(vacant), "Running");
  EXPECT_NE(vacant.events.at(0).message.find("not replaced (backoffLimit reached)"),
            std::string::npos)
      << vacant.events.at(0).message;
  const JobPlan after =
      planJob(observeElastic(spec, {worker(0, Phase::kRunning, 1), worker(1, Phase::kRunning, 1)},
                             vacant.status, kCreated + 41s));
  EXPECT_TRUE(after.create.empty()) << "a vacant rank is not created again";
  EXPECT_EQ(phaseOf(after), "Running");
}

api::TrainingJobSpec elasticTwoToThree() {
  api::TrainingJobSpec spec = twoWorkers();
  spec.elastic = api::ElasticPolicy{.minWorkers = 1, .maxWorkers = 3};
  return spec;
}

// Status of elasticTwoToThree() once its two workers run: it asked for the third.
JobPlan grown() {
  const api::TrainingJobSpec spec = elasticTwoToThree();
  const JobPlan created = planJob(observeElastic(spec, {}, Json(), kCreated + 1s));
  return planJob(observeElastic(spec, {worker(0, Phase::kRunning), worker(1, Phase::kRunning)},
                                created.status, kCreated + 10s));
}

WorkerState unplaced(int rank) {
  WorkerState w = worker(rank, Phase::kPending);
  w.node.clear();
  return w;
}

// Once spec.workers run, an elastic job asks for more up to maxWorkers; they wait for capacity
// without a start deadline and join when they run.
TEST(JobLifecycleTest, AnElasticJobGrowsTowardsMaxWorkersOnceItsWorkersRun) {
  const api::TrainingJobSpec spec = elasticTwoToThree();
  const JobPlan created = planJob(observeElastic(spec, {}, Json(), kCreated + 1s));
  EXPECT_EQ(created.create, (std::vector<int>{0, 1})) << "the gang first, then growth";
  const JobPlan running = grown();
  EXPECT_EQ(running.create, (std::vector<int>{2}));
  EXPECT_EQ(phaseOf(running), "Running");

  const JobPlan waiting = planJob(
      observeElastic(spec, {worker(0, Phase::kRunning), worker(1, Phase::kRunning), unplaced(2)},
                     running.status, kCreated + 10'000s));
  EXPECT_EQ(phaseOf(waiting), "Running") << "no start deadline for a worker beyond spec.workers";
  EXPECT_TRUE(waiting.create.empty());
  EXPECT_TRUE(waiting.remove.empty());

  const JobPlan joined = planJob(observeElastic(
      spec, {worker(0, Phase::kRunning), worker(1, Phase::kRunning), worker(2, Phase::kRunning)},
      waiting.status, kCreated + 10'010s));
  EXPECT_EQ(changeKinds(joined), "Joined ");
  EXPECT_EQ(kube::pathValue(joined.status, "elastic.changes").at(0).at("cause").as_string(),
            "growing towards maxWorkers");
  EXPECT_EQ(field(joined, "elastic.running"), 3);
  EXPECT_TRUE(joined.recoverySeconds.empty()) << "growth is not a recovery";
}

// A worker of spec.workers lost while growth waits for capacity: the unplaced worker beyond
// spec.workers is withdrawn so that it does not take the replacement's node, and asked for
// again only once spec.workers run.
TEST(JobLifecycleTest, AnElasticJobWithdrawsUnplacedGrowthWhenAWorkerIsLost) {
  const api::TrainingJobSpec spec = elasticTwoToThree();
  const JobPlan lost = planJob(
      observeElastic(spec, {worker(0, Phase::kRunning), worker(1, Phase::kFailed), unplaced(2)},
                     grown().status, kCreated + 20s));
  EXPECT_EQ(lost.remove, names({1, 2}));
  EXPECT_EQ(changeKinds(lost), "Lost ");
  const JobPlan gone =
      planJob(observeElastic(spec, {worker(0, Phase::kRunning)}, lost.status, kCreated + 21s));
  EXPECT_EQ(gone.create, (std::vector<int>{1})) << "the replacement alone";
  EXPECT_EQ(phaseOf(gone), "Running");
}

// An elastic job succeeds once a worker succeeded and none runs; one never placed is cleaned up.
TEST(JobLifecycleTest, AnElasticJobSucceedsWhenItsWorkersEnd) {
  const api::TrainingJobSpec spec = elasticTwoToThree();
  const JobPlan done = planJob(observeElastic(
      spec, {worker(0, Phase::kSucceeded), worker(1, Phase::kSucceeded), unplaced(2)},
      grown().status, kCreated + 30s));
  EXPECT_EQ(phaseOf(done), "Succeeded");
  EXPECT_EQ(done.remove, names({2})) << "cleanPodPolicy Running";
}

}  // namespace
}  // namespace granary::op
