#include "operator/core/job_lifecycle.h"

#include <algorithm>
#include <set>

#include "operator/core/conditions.h"

namespace granary::op {

using kube::Json;

namespace {

int64_t intField(const Json& status, const char* field) {
  const Json v = kube::pathValue(status, field);
  return v.is_integer() ? v.as_number().to_int64() : 0;
}

std::string stringField(const Json& status, const char* field) {
  const Json v = kube::pathValue(status, field);
  return v.is_string() ? v.as_string() : std::string();
}

bool terminal(const WorkerState& w) {
  return w.phase == WorkerState::Phase::kSucceeded || w.phase == WorkerState::Phase::kFailed;
}

// Why the current gang must restart: the first disrupted worker, else the first failed one, else
// the first lost one (see job_lifecycle.h).
struct GangFault {
  enum class Kind { kDisrupted, kFailed, kLost } kind;
  std::string reason;  // the Restarting condition's: WorkerDisrupted, WorkerFailed, WorkerLost
  std::string what;    // "worker 1 failed with exit code 1"
  int exitCode = 0;
};

std::optional<GangFault> gangFault(const std::vector<const WorkerState*>& current,
                                   int64_t recordedWorkers, int32_t workers) {
  const auto worker = [](const WorkerState* w) { return "worker " + std::to_string(w->rank); };
  for (const auto* w : current)
    if (w->disrupted)
      return GangFault{GangFault::Kind::kDisrupted, "WorkerDisrupted",
                       worker(w) + " was disrupted (evicted or preempted)"};
  for (const auto* w : current)
    if (!w->mountLost.empty() && !terminal(*w))
      return GangFault{GangFault::Kind::kDisrupted, "WorkerMountLost",
                       worker(w) + " lost its view of " + w->mountLost +
                           " (granary's cache node was replaced without handing over, or killed)"};
  for (const auto* w : current)
    if (w->phase == WorkerState::Phase::kFailed && !w->deleting)
      return GangFault{GangFault::Kind::kFailed, "WorkerFailed",
                       worker(w) + " failed with exit code " + std::to_string(w->exitCode),
                       w->exitCode};
  for (const auto* w : current)
    if (w->deleting || w->phase == WorkerState::Phase::kUnknown)
      return GangFault{GangFault::Kind::kLost, "WorkerLost",
                       worker(w) + (w->deleting ? " was deleted" : "'s node stopped reporting")};
  if (static_cast<int64_t>(current.size()) < recordedWorkers) {
    std::set<int> present;
    for (const auto* w : current) present.insert(w->rank);
    int rank = 0;
    while (rank < workers && present.count(rank)) ++rank;
    return GangFault{GangFault::Kind::kLost, "WorkerLost",
                     "worker " + std::to_string(rank) + " was deleted"};
  }
  return std::nullopt;
}

// The job's datasets by what they let it do, each a list of names ("a, b").
struct DatasetLists {
  std::string missing, failed;
  std::string warming;    // will be cached: BeforeStart waits
  std::string notWarmed;  // settled uncached: OnDemand under spec.cache.warm Never
  std::string quotaFull;  // settled partly cached: QuotaFull
};

DatasetLists datasetLists(const std::vector<DatasetState>& datasets) {
  DatasetLists lists;
  const auto add = [](std::string& list, const std::string& name) {
    list += (list.empty() ? "" : ", ") + name;
  };
  using api::DatasetPhase;
  for (const auto& d : datasets) {
    if (!d.exists) {
      add(lists.missing, d.name);
    } else if (d.phase == DatasetPhase::kFailed) {
      add(lists.failed, d.name);
    } else if (d.phase == DatasetPhase::kReady) {
      continue;
    } else if (!d.phase || !api::letsWaitingJobsStart(*d.phase, d.warm)) {
      add(lists.warming, d.name);
    } else {
      add(d.phase == DatasetPhase::kQuotaFull ? lists.quotaFull : lists.notWarmed, d.name);
    }
  }
  return lists;
}

struct Planner {
  const JobObservation& o;
  JobPlan plan;
  Json status;
  Json conditions;
  int64_t restarts;
  int64_t disruptions;  // the restarts not counted against backoffLimit

  explicit Planner(const JobObservation& observation)
      : o(observation),
        status(observation.previousStatus.is_object() ? observation.previousStatus
                                                      : Json::object()),
        conditions(kube::pathValue(observation.previousStatus, "conditions")),
        restarts(intField(observation.previousStatus, "restarts")),
        disruptions(intField(observation.previousStatus, "disruptions")) {}

  void condition(const std::string& type, bool value, const std::string& reason,
                 const std::string& message) {
    setCondition(conditions, {type, value, reason, message}, o.generation, o.now);
  }
  void event(bool warning, const std::string& reason, const std::string& message) {
    plan.events.push_back({warning, reason, message});
  }
  void requeueIn(std::chrono::seconds after) {
    after = std::max(after, std::chrono::seconds(1));
    if (!plan.requeueAfter || after < *plan.requeueAfter) plan.requeueAfter = after;
  }

  // Pods to delete once the job finished, by cleanPodPolicy.
  void cleanUp() {
    for (const auto& w : o.workers) {
      const bool active = !terminal(w);
      if (o.spec.runPolicy.cleanPodPolicy == api::CleanPodPolicy::kAll ||
          (o.spec.runPolicy.cleanPodPolicy == api::CleanPodPolicy::kRunning && active))
        plan.remove.push_back(w.name);
    }
  }
  void finish(bool succeeded, const std::string& reason, const std::string& message) {
    status["phase"] = Json::string(succeeded ? "Succeeded" : "Failed");
    status["completionTime"] = Json::string(kube::metav1Time(o.now));
    condition("Running", false, reason, message);
    condition(succeeded ? "Succeeded" : "Failed", true, reason, message);
    event(!succeeded, reason, message);
    cleanUp();
  }
  void counts(const std::vector<const WorkerState*>& current) {
    int64_t active = 0, ready = 0, succeeded = 0, failed = 0;
    for (const auto* w : current) {
      if (w->deleting) continue;
      active += !terminal(*w);
      ready += w->phase == WorkerState::Phase::kRunning && w->ready;
      succeeded += w->phase == WorkerState::Phase::kSucceeded;
      failed += w->phase == WorkerState::Phase::kFailed;
    }
    Json workers = Json::object();
    workers["active"] = Json::number(active);
    workers["ready"] = Json::number(ready);
    workers["succeeded"] = Json::number(succeeded);
    workers["failed"] = Json::number(failed);
    status["workers"] = std::move(workers);
  }
  void placement(const std::vector<const WorkerState*>& current) {
    Json placed = Json::array();
    for (const auto* w : current) {
      if (w->node.empty()) continue;
      double fraction = 0;
      int counted = 0;
      for (const auto& d : o.datasets) {
        if (!d.exists) continue;
        ++counted;
        if (d.totalBytes > 0) {
          auto it = d.cachedBytesByNode.find(w->node);
          if (it != d.cachedBytesByNode.end())
            fraction += static_cast<double>(it->second) / static_cast<double>(d.totalBytes);
        }
      }
      Json p = Json::object();
      p["rank"] = Json::number(w->rank);
      p["node"] = Json::string(w->node);
      p["cachedFraction"] = Json::number(counted ? fraction / counted : 0.0);
      placed[placed.size()] = std::move(p);
    }
    status["placement"] = std::move(placed);
  }

  JobPlan run() {
    status["observedGeneration"] = Json::number(o.generation);
    status["gpus"] = Json::number(int64_t{o.spec.workers} * o.spec.gpusPerWorker);
    status["restarts"] = Json::number(restarts);
    if (disruptions > 0) status["disruptions"] = Json::number(disruptions);
    const std::string phase = stringField(o.previousStatus, "phase");
    std::vector<const WorkerState*> current, old;
    for (const auto& w : o.workers) {
      const bool inAttempt = w.attempt == restarts && w.rank < o.spec.workers;
      if (inAttempt) {
        current.push_back(&w);
      } else if (!w.deleting) {  // an older attempt's pod already going away needs nothing
        old.push_back(&w);
      }
    }
    std::sort(current.begin(), current.end(),
              [](const WorkerState* a, const WorkerState* b) { return a->rank < b->rank; });
    if (phase == "Succeeded" || phase == "Failed") {
      cleanUp();
      if (o.spec.runPolicy.ttlSecondsAfterFinished) {
        const auto done = kube::parseMetav1Time(stringField(o.previousStatus, "completionTime"));
        const auto expires =
            done.value_or(o.now) + std::chrono::seconds(*o.spec.runPolicy.ttlSecondsAfterFinished);
        if (o.now >= expires) {
          plan.deleteJob = true;
        } else {
          requeueIn(std::chrono::duration_cast<std::chrono::seconds>(expires - o.now));
        }
      }
      return done(current);
    }
    Condition created = conditionOf(o.previousStatus, "Created");
    if (!created.status) condition("Created", true, "Created", "the job was accepted");

    if (o.spec.suspend) {
      for (const auto& w : o.workers) plan.remove.push_back(w.name);
      status["phase"] = Json::string("Suspended");
      condition("Suspended", true, "Suspended", "spec.suspend is true: workers deleted");
      condition("Running", false, "Suspended", "the job is suspended");
      if (phase != "Suspended") event(false, "Suspended", "workers deleted while suspended");
      return done({});
    }
    WallTime since = o.created;  // when the current wait for workers began
    if (conditionOf(o.previousStatus, "Suspended").status) {
      condition("Suspended", false, "Resumed", "spec.suspend is false again");
      event(false, "Resumed", "the job resumes");
      since = o.now;
    } else if (auto resumed = resumedAt()) {
      since = std::max(since, *resumed);
    }

    // Datasets: all must exist; BeforeStart also waits until they are settled.
    const DatasetLists lists = datasetLists(o.datasets);
    const std::string& missing = lists.missing;
    const std::string& failed = lists.failed;
    const std::string& warming = lists.warming;
    datasetsCondition(lists);
    const bool canStart = missing.empty() && failed.empty() &&
                          (o.spec.warmPolicy != api::WarmStart::kBeforeStart || warming.empty());

    for (const auto* w : old) plan.remove.push_back(w->name);

    // A failed, lost or disrupted worker restarts the whole gang, or fails the job.
    const int64_t recorded = intField(o.previousStatus, "workers.active") +
                             intField(o.previousStatus, "workers.succeeded") +
                             intField(o.previousStatus, "workers.failed");
    if (auto fault = gangFault(current, recorded, o.spec.workers)) {
      const bool restarted = restartOrFail(*fault, current);
      return done(restarted ? std::vector<const WorkerState*>{} : current);
    }
    const bool allSucceeded = static_cast<int>(current.size()) == o.spec.workers &&
                              std::all_of(current.begin(), current.end(), [](const WorkerState* w) {
                                return w->phase == WorkerState::Phase::kSucceeded;
                              });
    if (allSucceeded) {
      finish(true, "Succeeded", "every worker succeeded");
      return done(current);
    }
    const auto startTime = kube::parseMetav1Time(stringField(o.previousStatus, "startTime"));
    if (startTime && o.spec.runPolicy.activeDeadlineSeconds) {
      const auto deadline =
          *startTime + std::chrono::seconds(*o.spec.runPolicy.activeDeadlineSeconds);
      if (o.now >= deadline) {
        finish(false, "DeadlineExceeded",
               "activeDeadlineSeconds " + std::to_string(*o.spec.runPolicy.activeDeadlineSeconds) +
                   " passed");
        return done(current);
      }
      requeueIn(std::chrono::duration_cast<std::chrono::seconds>(deadline - o.now));
    }
    const bool allRunning = static_cast<int>(current.size()) == o.spec.workers &&
                            std::all_of(current.begin(), current.end(), [](const WorkerState* w) {
                              return w->phase == WorkerState::Phase::kRunning ||
                                     w->phase == WorkerState::Phase::kSucceeded;
                            });
    if (!allRunning) {
      for (const auto* w : current) since = std::max(since, w->created);
      if (current.empty() && conditionOf(o.previousStatus, "Restarting").status) since = o.now;
      const auto deadline = since + std::chrono::seconds(o.spec.runPolicy.startDeadlineSeconds);
      if (o.now >= deadline) {
        std::string why;
        for (const auto* w : current)
          if (!w->waitingReason.empty())
            why += "; worker " + std::to_string(w->rank) + ": " + w->waitingReason;
        finish(false, "StartDeadlineExceeded",
               "workers did not all start within startDeadlineSeconds " +
                   std::to_string(o.spec.runPolicy.startDeadlineSeconds) + why);
        return done(current);
      }
      requeueIn(std::chrono::duration_cast<std::chrono::seconds>(deadline - o.now));
    }
    if (canStart && old.empty()) {
      std::set<int> present;
      for (const auto* w : current) present.insert(w->rank);
      for (int rank = 0; rank < o.spec.workers; ++rank)
        if (!present.count(rank)) plan.create.push_back(rank);
    }
    if (allRunning) {
      status["phase"] = Json::string("Running");
      if (!startTime) status["startTime"] = Json::string(kube::metav1Time(o.now));
      condition("Running", true, "Running", "every worker is running");
      if (conditionOf(o.previousStatus, "Restarting").status)
        condition("Restarting", false, "Running", "the gang runs again");
      if (phase != "Running") event(false, "Running", "every worker is running");
    } else {
      const bool restarting = conditionOf(o.previousStatus, "Restarting").status;
      // Only BeforeStart holds workers back for datasets that exist and have not failed.
      const bool warmingFirst = !canStart && missing.empty() && failed.empty();
      status["phase"] = Json::string(restarting     ? "Restarting"
                                     : warmingFirst ? "Warming"
                                                    : "Pending");
      condition("Running", false, canStart ? "WorkersStarting" : "WaitingForDatasets",
                canStart ? "waiting for every worker to run"
                : warmingFirst
                    ? "warmPolicy BeforeStart: waiting for Dataset(s) " + warming + " to be Ready"
                    : "waiting for the datasets");
    }
    return done(current);
  }

  // Sets DatasetsReady from `lists` (see job_lifecycle.h), with an event when a dataset is
  // first found missing or failed.
  void datasetsCondition(const DatasetLists& lists) {
    const Condition before = conditionOf(o.previousStatus, "DatasetsReady");
    if (!lists.missing.empty()) {
      condition("DatasetsReady", false, "DatasetNotFound",
                "Dataset(s) " + lists.missing + " not found in this namespace; create them");
      if (before.reason != "DatasetNotFound")
        event(true, "DatasetNotFound",
              "Dataset(s) " + lists.missing + " not found in this namespace");
    } else if (!lists.failed.empty()) {
      condition("DatasetsReady", false, "DatasetFailed",
                "Dataset(s) " + lists.failed + " failed; see their status");
      if (before.reason != "DatasetFailed")
        event(true, "DatasetFailed", "Dataset(s) " + lists.failed + " failed");
    } else if (!lists.warming.empty()) {
      condition("DatasetsReady", false, "Warming", "Dataset(s) " + lists.warming + " are warming");
    } else if (!lists.notWarmed.empty() || !lists.quotaFull.empty()) {
      std::string message;
      if (!lists.notWarmed.empty())
        message = "Dataset(s) " + lists.notWarmed +
                  " not warmed (spec.cache.warm Never): read from the origin on demand";
      if (!lists.quotaFull.empty())
        message += (message.empty() ? "" : "; ") + std::string("Dataset(s) ") + lists.quotaFull +
                   " partly cached: their cache quota filled first (spec.cache.capacityPerNode)";
      const std::string reason = lists.quotaFull.empty()   ? "NotWarmedByPolicy"
                                 : lists.notWarmed.empty() ? "CacheQuotaFull"
                                                           : "NotFullyCached";
      condition("DatasetsReady", true, reason, message);
    } else {
      condition("DatasetsReady", true, "Ready", "every dataset is cached");
    }
  }

  // Restarts the gang after `fault` (a new attempt: true), or fails the job when restartPolicy
  // or backoffLimit says no (false). Disruptions always restart and are not counted.
  bool restartOrFail(const GangFault& fault, const std::vector<const WorkerState*>& current) {
    const auto policy = o.spec.runPolicy.restartPolicy;
    const int32_t limit = o.spec.runPolicy.backoffLimit;
    const bool disruption = fault.kind == GangFault::Kind::kDisrupted;
    const bool retryable = disruption || policy == api::RestartPolicy::kOnFailure ||
                           (policy == api::RestartPolicy::kExitCode &&
                            (fault.kind == GangFault::Kind::kLost || fault.exitCode >= 128));
    const int64_t counted = restarts - disruptions;
    if (!retryable || (!disruption && counted >= limit)) {
      finish(
          false, retryable ? "BackoffLimitExceeded" : fault.reason,
          fault.what + (retryable ? "; backoffLimit " + std::to_string(limit) + " reached" : ""));
      return false;
    }
    for (const auto* c : current) plan.remove.push_back(c->name);
    ++restarts;
    status["restarts"] = Json::number(restarts);
    if (disruption) status["disruptions"] = Json::number(++disruptions);
    status["phase"] = Json::string("Restarting");
    const std::string message =
        fault.what + "; restarting the gang (" +
        (disruption ? std::string("a disruption, not counted against backoffLimit")
                    : std::to_string(counted + 1) + " of " + std::to_string(limit)) +
        ")";
    condition("Restarting", true, fault.reason, message);
    condition("Running", false, "Restarting", message);
    event(true, "Restarting", message);
    return true;
  }

  std::optional<WallTime> resumedAt() const {
    const Json cs = kube::pathValue(o.previousStatus, "conditions");
    if (!cs.is_array()) return std::nullopt;
    for (const auto& c : cs.as_array())
      if (c.has_string_field("type") && c.at("type").as_string() == "Suspended" &&
          c.has_string_field("lastTransitionTime"))
        return kube::parseMetav1Time(c.at("lastTransitionTime").as_string());
    return std::nullopt;
  }

  // The version of each dataset the workers read: the newest when the job first creates workers
  // for it, then kept for the job's life, gang restarts included (names::kCsiVersionAttribute).
  void pinVersions() {
    if (plan.create.empty()) return;
    Json versions = kube::pathValue(status, "datasetVersions");
    if (!versions.is_object()) versions = Json::object();
    for (const auto& d : o.datasets)
      if (d.version > 0 && !versions.has_field(d.name)) versions[d.name] = Json::number(d.version);
    if (versions.size() > 0) status["datasetVersions"] = versions;
  }

  JobPlan done(const std::vector<const WorkerState*>& current) {
    pinVersions();
    counts(current);
    placement(current);
    status["conditions"] = conditions;
    std::sort(plan.remove.begin(), plan.remove.end());
    plan.remove.erase(std::unique(plan.remove.begin(), plan.remove.end()), plan.remove.end());
    plan.status = std::move(status);
    return std::move(plan);
  }
};

}  // namespace

JobPlan planJob(const JobObservation& observation) { return Planner(observation).run(); }

}  // namespace granary::op
