#include "operator/core/job_lifecycle.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <type_traits>

#include "common/api/membership.h"
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

// Whether `w`, still running or starting, is on a node not Ready for kNodeLostAfter.
bool onLostNode(const WorkerState& w, WallTime now) {
  return !terminal(w) && w.nodeNotReadySince && now - *w.nodeNotReadySince >= kNodeLostAfter;
}

// `plan` looks again within `after` (at least a second from now).
void lookAgainIn(JobPlan& plan, std::chrono::seconds after) {
  after = std::max(after, std::chrono::seconds(1));
  if (!plan.requeueAfter || after < *plan.requeueAfter) plan.requeueAfter = after;
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
                                   int64_t recordedWorkers, int32_t workers, WallTime now) {
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
    if (w->deleting || w->phase == WorkerState::Phase::kUnknown || onLostNode(*w, now))
      return GangFault{GangFault::Kind::kLost, "WorkerLost",
                       worker(w) + (w->deleting ? " was deleted"
                                    : w->phase == WorkerState::Phase::kUnknown
                                        ? "'s node stopped reporting"
                                        : "'s node " + w->node + " is not Ready")};
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

// Every worker of the current attempt that is lost, failed or disrupted (as gangFault judges
// them), each with its fault; ranks missing beyond `recordedWorkers` (pods that vanished) too.
struct WorkerFault {
  const WorkerState* worker;  // null for a vanished pod
  int rank;
  GangFault fault;
};

std::vector<WorkerFault> workerFaults(const std::vector<const WorkerState*>& current,
                                      int64_t recordedWorkers, int32_t workers,
                                      const std::set<int>& occupied, WallTime now) {
  std::vector<WorkerFault> faults;
  std::set<int> present = occupied;
  for (const auto* w : current) {
    present.insert(w->rank);
    if (auto fault = gangFault({w}, 0, workers, now)) faults.push_back({w, w->rank, *fault});
  }
  int64_t missing = recordedWorkers - static_cast<int64_t>(current.size());
  for (int rank = 0; rank < workers && missing > 0; ++rank)
    if (!present.count(rank)) {
      faults.push_back({nullptr,
                        rank,
                        {GangFault::Kind::kLost, "WorkerLost",
                         "worker " + std::to_string(rank) + " was deleted"}});
      --missing;
    }
  return faults;
}

std::set<std::string> stringSet(const Json& list) {
  std::set<std::string> out;
  if (list.is_array())
    for (const auto& item : list.as_array())
      if (item.is_string()) out.insert(item.as_string());
  return out;
}

std::set<int> intSet(const Json& list) {
  std::set<int> out;
  if (list.is_array())
    for (const auto& item : list.as_array())
      if (item.is_integer()) out.insert(item.as_integer());
  return out;
}

Json jsonArray(const auto& items) {
  Json out = Json::array();
  for (const auto& item : items)
    if constexpr (std::is_same_v<std::decay_t<decltype(item)>, std::string>)
      out[out.size()] = Json::string(item);
    else
      out[out.size()] = Json::number(item);
  return out;
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
  // An elastic job's membership (status.elastic): workers replaced alone (counted against
  // backoffLimit as gang restarts are), the pods deleted for it still present (by uid), the
  // ranks whose replacement has not run yet, the ranks left vacant (no restart was allowed).
  int64_t replacements;
  std::set<std::string> replacing;
  std::set<int> joining, vacant;

  explicit Planner(const JobObservation& observation)
      : o(observation),
        status(observation.previousStatus.is_object() ? observation.previousStatus
                                                      : Json::object()),
        conditions(kube::pathValue(observation.previousStatus, "conditions")),
        restarts(intField(observation.previousStatus, "restarts")),
        disruptions(intField(observation.previousStatus, "disruptions")),
        replacements(intField(observation.previousStatus, "elastic.replacements")),
        replacing(stringSet(kube::pathValue(observation.previousStatus, "elastic.replacing"))),
        joining(intSet(kube::pathValue(observation.previousStatus, "elastic.joining"))),
        vacant(intSet(kube::pathValue(observation.previousStatus, "elastic.vacant"))) {}

  void condition(const std::string& type, bool value, const std::string& reason,
                 const std::string& message) {
    setCondition(conditions, {type, value, reason, message}, o.generation, o.now);
  }
  void event(bool warning, const std::string& reason, const std::string& message) {
    plan.events.push_back({warning, reason, message});
  }
  void requeueIn(std::chrono::seconds after) { lookAgainIn(plan, after); }

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
    std::set<int> leaving;  // ranks whose pod, deleted to be replaced, is still there
    std::set<std::string> stillReplacing;
    for (const auto& w : o.workers) {
      const bool inAttempt = w.attempt == restarts && w.rank < rankLimit();
      if (inAttempt && replacing.count(w.uid)) {
        leaving.insert(w.rank);
        stillReplacing.insert(w.uid);
      } else if (inAttempt) {
        current.push_back(&w);
      } else if (!w.deleting) {  // an older attempt's pod already going away needs nothing
        old.push_back(&w);
      }
    }
    replacing = std::move(stillReplacing);
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

    // A failed, lost or disrupted worker restarts the whole gang, or fails the job; an elastic
    // job's is replaced alone while minWorkers remain.
    const int64_t recorded = intField(o.previousStatus, "workers.active") +
                             intField(o.previousStatus, "workers.succeeded") +
                             intField(o.previousStatus, "workers.failed");
    std::set<int> occupied = leaving;
    occupied.insert(vacant.begin(), vacant.end());
    if (o.spec.elastic) {
      const auto faults = workerFaults(current, recorded, rankLimit(), occupied, o.now);
      if (!faults.empty() && goOnWithout(faults, current)) {
        std::vector<const WorkerState*> kept;
        for (const auto* w : current)
          if (!replacing.count(w->uid)) kept.push_back(w);
        return done(kept);
      }
    }
    if (auto fault = gangFault(current, recorded, rankLimit(), o.now)) {
      const bool restarted = restartOrFail(*fault, current);
      return done(restarted ? std::vector<const WorkerState*>{} : current);
    }
    const bool allSucceeded = succeeded(current);
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
    const int wanted = o.spec.workers - static_cast<int>(vacant.size());
    const int running =
        static_cast<int>(std::count_if(current.begin(), current.end(), [](const WorkerState* w) {
          return w->phase == WorkerState::Phase::kRunning ||
                 w->phase == WorkerState::Phase::kSucceeded;
        }));
    // Every worker of spec.workers (but the vacant) runs; an elastic job's surplus may not.
    const int coreRunning =
        static_cast<int>(std::count_if(current.begin(), current.end(), [&](const WorkerState* w) {
          return w->rank < o.spec.workers && (w->phase == WorkerState::Phase::kRunning ||
                                              w->phase == WorkerState::Phase::kSucceeded);
        }));
    const bool allRunning = coreRunning == wanted;
    // An elastic job that started goes on while minWorkers run; the rest join when they can.
    const bool runsElastic = o.spec.elastic && startTime && running >= o.spec.elastic->minWorkers;
    if (o.spec.elastic) noteMembership(current, running, startTime.has_value());
    if (!allRunning && !runsElastic) {
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
      present.insert(occupied.begin(), occupied.end());
      for (int rank = 0; rank < o.spec.workers; ++rank)
        if (!present.count(rank)) plan.create.push_back(rank);
      // An elastic job grows towards maxWorkers once spec.workers run: each worker beyond it is
      // placed on its own when capacity allows, and joins at the next rendezvous.
      for (int rank = o.spec.workers; allRunning && rank < rankLimit(); ++rank)
        if (!present.count(rank)) {
          plan.create.push_back(rank);
          joining.insert(rank);
        }
    }
    if (allRunning || runsElastic) {
      status["phase"] = Json::string("Running");
      if (!startTime) status["startTime"] = Json::string(kube::metav1Time(o.now));
      condition("Running", true, "Running",
                allRunning ? "every worker is running"
                           : std::to_string(running) + " of " + std::to_string(o.spec.workers) +
                                 " workers running (spec.elastic.minWorkers " +
                                 std::to_string(o.spec.elastic->minWorkers) +
                                 "); the others join at the next rendezvous");
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
    const int32_t limit = o.spec.runPolicy.backoffLimit;
    const bool disruption = fault.kind == GangFault::Kind::kDisrupted;
    const bool retryable = retries(fault);
    const int64_t counted = restarts - disruptions + replacements;
    if (!retryable || (!disruption && counted >= limit)) {
      finish(
          false, retryable ? "BackoffLimitExceeded" : fault.reason,
          fault.what + (retryable ? "; backoffLimit " + std::to_string(limit) + " reached" : ""));
      return false;
    }
    for (const auto* c : current) plan.remove.push_back(c->name);
    if (o.spec.elastic) {
      recordChange(api::MembershipChange::Kind::kGangRestart, "", fault.what, 0);
      replacing.clear();
      joining.clear();
      vacant.clear();
    }
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

  // The ranks a worker of the current attempt may have: up to an elastic job's maxWorkers.
  int rankLimit() const { return o.spec.elastic ? o.spec.elastic->maxWorkers : o.spec.workers; }

  // Whether the job succeeded: every worker of spec.workers did; for an elastic job (torchrun's
  // agents all end once training does), one did and none runs any more (those never placed are
  // cleaned up).
  bool succeeded(const std::vector<const WorkerState*>& current) const {
    const auto is = [](WorkerState::Phase phase) {
      return [phase](const WorkerState* w) { return w->phase == phase; };
    };
    if (!o.spec.elastic)
      return static_cast<int>(current.size()) == o.spec.workers &&
             std::all_of(current.begin(), current.end(), is(WorkerState::Phase::kSucceeded));
    return std::any_of(current.begin(), current.end(), is(WorkerState::Phase::kSucceeded)) &&
           std::none_of(current.begin(), current.end(), is(WorkerState::Phase::kRunning));
  }

  // Whether runPolicy.restartPolicy lets `fault` be retried (see job_lifecycle.h); a disruption
  // always is.
  bool retries(const GangFault& fault) const {
    const auto policy = o.spec.runPolicy.restartPolicy;
    return fault.kind == GangFault::Kind::kDisrupted || policy == api::RestartPolicy::kOnFailure ||
           (policy == api::RestartPolicy::kExitCode &&
            (fault.kind == GangFault::Kind::kLost || fault.exitCode >= 128));
  }

  // An elastic job's workers `faults` lost: replaced alone (or left vacant) when
  // api::respondToLoss says the others go on; false when it says the gang restarts or fails.
  bool goOnWithout(const std::vector<WorkerFault>& faults,
                   const std::vector<const WorkerState*>& current) {
    bool retryable = true;
    int64_t counting = 0;  // faults counted against backoffLimit (not disruptions)
    for (const auto& f : faults) {
      counting += f.fault.kind != GangFault::Kind::kDisrupted;
      retryable = retryable && retries(f.fault);
    }
    int remaining = 0;  // running, not lost
    for (const auto* w : current)
      remaining += w->phase == WorkerState::Phase::kRunning &&
                   std::none_of(faults.begin(), faults.end(),
                                [&](const WorkerFault& f) { return f.worker == w; });
    const bool budgetLeft =
        restarts - disruptions + replacements + counting <= o.spec.runPolicy.backoffLimit;
    const api::LossResponse response = api::respondToLoss(o.spec, remaining, retryable, budgetLeft);
    if (response != api::LossResponse::kReplace && response != api::LossResponse::kContinue)
      return false;
    const bool replace = response == api::LossResponse::kReplace;
    if (replace) replacements += counting;
    for (const auto& f : faults) {
      if (f.worker) {
        plan.remove.push_back(f.worker->name);
        replacing.insert(f.worker->uid);
      }
      (replace ? joining : vacant).insert(f.rank);
      const std::string message =
          f.fault.what + "; " + std::to_string(remaining) + " worker(s) go on at the rendezvous" +
          (replace ? "; a replacement joins them"
                   : "; not replaced (" +
                         std::string(retryable ? "backoffLimit reached" : "restartPolicy") + ")");
      recordChange(api::MembershipChange::Kind::kLost, workerName(f.rank), f.fault.what, remaining);
      plan.goneFromRendezvous.push_back(workerName(f.rank));
      event(true, "WorkerLost", message);
    }
    if (stringField(status, "elastic.belowWantedSince").empty())
      status["elastic"]["belowWantedSince"] = Json::string(kube::metav1Time(o.now));
    withdrawUnplacedSurplus(current);
    return true;
  }

  std::string workerName(int rank) const { return api::workerName(o.jobName, rank); }

  // Workers beyond spec.workers not yet placed are deleted when one of spec.workers is lost, so
  // that they do not take the node its replacement needs; they come again once spec.workers run.
  void withdrawUnplacedSurplus(const std::vector<const WorkerState*>& current) {
    for (const auto* w : current)
      if (w->rank >= o.spec.workers && w->node.empty() && !terminal(*w) && !w->deleting) {
        plan.remove.push_back(w->name);
        replacing.insert(w->uid);
        joining.erase(w->rank);
      }
  }

  // Appends a change to status.elastic.changes (the newest api::Membership::kMaxKept).
  void recordChange(api::MembershipChange::Kind kind, const std::string& worker,
                    const std::string& cause, int running) {
    Json changes = kube::pathValue(status, "elastic.changes");
    if (!changes.is_array()) changes = Json::array();
    Json change = Json::object();
    change["time"] = Json::string(kube::metav1Time(o.now));
    change["kind"] = Json::string(std::string(api::membershipKindName(kind)));
    if (!worker.empty()) change["worker"] = Json::string(worker);
    change["cause"] = Json::string(cause);
    change["running"] = Json::number(running);
    Json kept = Json::array();
    const size_t from = changes.size() + 1 > api::Membership::kMaxKept
                            ? changes.size() + 1 - api::Membership::kMaxKept
                            : 0;
    for (size_t i = from; i < changes.size(); ++i) kept[kept.size()] = changes[i];
    kept[kept.size()] = std::move(change);
    status["elastic"]["changes"] = std::move(kept);
    plan.membershipChanges.emplace_back(api::membershipKindName(kind));
    status["elastic"]["membershipChanges"] =
        Json::number(intField(status, "elastic.membershipChanges") + 1);
  }

  // When `worker` was last lost, from status.elastic.changes.
  std::optional<WallTime> lostAt(const std::string& worker) const {
    const Json changes = kube::pathValue(status, "elastic.changes");
    if (!changes.is_array()) return std::nullopt;
    for (size_t i = changes.size(); i-- > 0;) {
      const Json& c = changes.at(i);
      if (stringField(c, "kind") == "Lost" && stringField(c, "worker") == worker)
        return kube::parseMetav1Time(stringField(c, "time"));
    }
    return std::nullopt;
  }

  // Replacements that run now joined; the workers running, and the time spent below the
  // workers wanted since the job started.
  void noteMembership(const std::vector<const WorkerState*>& current, int running, bool started) {
    for (const auto* w : current)
      if (joining.count(w->rank) && w->phase == WorkerState::Phase::kRunning) {
        joining.erase(w->rank);
        if (const auto lost = lostAt(w->name))
          plan.recoverySeconds.push_back(std::chrono::duration<double>(o.now - *lost).count());
        recordChange(api::MembershipChange::Kind::kJoined, w->name,
                     w->rank < o.spec.workers ? "replacement" : "growing towards maxWorkers",
                     running);
        event(false, "WorkerJoined",
              w->name + " runs and joins the others at the next rendezvous (" +
                  std::to_string(running) + " of " + std::to_string(o.spec.workers) + ")");
      }
    status["elastic"]["running"] = Json::number(running);
    const auto since = kube::parseMetav1Time(stringField(status, "elastic.belowWantedSince"));
    double below = 0;
    if (const Json b = kube::pathValue(status, "elastic.secondsBelowWanted"); b.is_number())
      below = b.as_double();
    if (started && running < o.spec.workers && !since) {
      status["elastic"]["belowWantedSince"] = Json::string(kube::metav1Time(o.now));
    } else if (since && (running >= o.spec.workers || !started)) {
      below += std::chrono::duration<double>(o.now - *since).count();
      status["elastic"].erase("belowWantedSince");
    }
    status["elastic"]["secondsBelowWanted"] = Json::number(std::round(below * 10) / 10);
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
    if (o.spec.elastic) {
      status["elastic"]["replacements"] = Json::number(replacements);
      status["elastic"]["replacing"] = jsonArray(replacing);
      status["elastic"]["joining"] = jsonArray(joining);
      status["elastic"]["vacant"] = jsonArray(vacant);
    }
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

namespace {

// The pods of `plan.remove` on a lost node go without grace, and so do those whose graceful
// deletion began before their node was lost; a worker on a node not Ready yet not lost is looked
// at again once it would be.
void deleteWithoutGraceOnLostNodes(const JobObservation& o, JobPlan& plan) {
  for (const WorkerState& w : o.workers) {
    if (onLostNode(w, o.now)) {
      const auto it = std::find(plan.remove.begin(), plan.remove.end(), w.name);
      const bool removed = it != plan.remove.end();
      if (removed) plan.remove.erase(it);
      if (removed || w.deleting) plan.removeNow.push_back(w.name);
    } else if (w.nodeNotReadySince && !terminal(w)) {
      lookAgainIn(plan, std::chrono::ceil<std::chrono::seconds>(*w.nodeNotReadySince +
                                                                kNodeLostAfter - o.now));
    }
  }
}

}  // namespace

JobPlan planJob(const JobObservation& observation) {
  JobPlan plan = Planner(observation).run();
  deleteWithoutGraceOnLostNodes(observation, plan);
  return plan;
}

}  // namespace granary::op
