// The TrainingJob lifecycle planner (planJob): what the controller does next, from what it
// sees: create missing workers, restart the whole gang after a failure (up to backoffLimit),
// fail on deadlines, finish, clean up, suspend and resume; and the job's status. Pure: the
// controller applies the plan.
//
// Phases: Pending (workers being created or starting), Warming (warmPolicy BeforeStart: no
// worker is created until every dataset is settled: Ready, or short of Ready by its own
// settings: OnDemand under spec.cache.warm Never, or QuotaFull; an OnJob dataset warms for the
// waiting job, see readers.h), Running (every worker runs), Restarting (a gang restart until
// every worker runs again), Suspended, Succeeded, Failed.
//
// The DatasetsReady condition: False while a dataset is missing (DatasetNotFound), failed
// (DatasetFailed) or warming (Warming); True once every dataset is settled: Ready when each is
// cached, else NotWarmedByPolicy, CacheQuotaFull or, both at once, NotFullyCached, its message
// naming the datasets the job reads uncached and why.
//
// The gang restarts, all workers deleted and created again in the next attempt, when one of the
// current attempt's workers:
//   - failed: counted against backoffLimit; restartPolicy ExitCode retries exit codes >= 128
//     only, Never none;
//   - was lost: its pod deleted (gone, or a deletionTimestamp set) or its node unreachable
//     (phase Unknown, or the Node not Ready for kNodeLostAfter): a failure without an exit code,
//     counted against backoffLimit, retried as a killed process is (OnFailure and ExitCode; not
//     Never). A pod on a node not Ready for kNodeLostAfter is deleted without grace
//     (JobPlan::removeNow), also when its deletion began earlier: no kubelet is there to
//     finish a graceful one, and its name is free for the next attempt or a replacement;
//   - was disrupted: evicted (status.reason Evicted) or given a DisruptionTarget condition
//     (preemption, a drain, a taint), or cut off from a dataset (its view of the dataset's mount
//     ended, names::kMountLostAnnotation: its reads fail until it restarts): always retried and,
//     as Kubernetes Jobs do with pod disruptions, not counted against backoffLimit
//     (status.disruptions counts them).
// status.restarts counts every gang restart; it is the current attempt, the workers'
// granary.io/attempt label. A worker is known lost when fewer of the current attempt's
// workers exist than the last status counted (status.workers).
//
// An elastic job (spec.elastic) loses workers without a gang restart while api::respondToLoss
// says the others go on (at least minWorkers left): each lost worker's pod alone is deleted and
// created again (status.elastic.replacements, counted against backoffLimit with the gang
// restarts; disruptions are not counted), or its rank left vacant when no restart is allowed.
// The job stays Running while minWorkers run, with no start deadline for the replacements.
// Once every worker of spec.workers runs, an elastic job grows towards maxWorkers: the ranks
// beyond spec.workers are created (names::kSurplusLabel: granary-scheduler places each on its own
// when capacity allows) and join at the next rendezvous; those not yet placed are withdrawn when
// a worker of spec.workers is lost, so that they do not take its replacement's node. An elastic
// job succeeds once a worker succeeded and none runs any more. Each
// loss, join and gang restart is a change in status.elastic.changes (the newest 32, with
// status.elastic.membershipChanges counting all) and an Event (WorkerLost, WorkerJoined);
// status.elastic.running and secondsBelowWanted (with belowWantedSince while below) tell how
// many run and how long the job ran short of spec.workers.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/api/dataset.h"
#include "common/api/training_job.h"
#include "common/kube/object.h"

namespace granary::op {

using WallTime = std::chrono::system_clock::time_point;

// How long a worker's Node may be not Ready (after the node lifecycle controller's own grace)
// before the worker counts as lost.
inline constexpr std::chrono::seconds kNodeLostAfter{30};

struct WorkerState {
  std::string name;
  std::string uid;
  int rank = 0;
  int attempt = 0;  // the gang attempt it was created for
  // kUnknown: the kubelet stopped reporting (the node is unreachable).
  enum class Phase { kPending, kRunning, kSucceeded, kFailed, kUnknown } phase = Phase::kPending;
  bool ready = false;
  bool deleting = false;      // metadata.deletionTimestamp is set
  bool disrupted = false;     // status.reason Evicted, or a DisruptionTarget condition True
  std::string mountLost;      // names::kMountLostAnnotation: which dataset, node and since when
  int exitCode = 0;           // of a failed worker's first failed container
  std::string waitingReason;  // e.g. ImagePullBackOff
  std::string node;
  // Since when the Node it is bound to has not been Ready (its Ready condition's
  // lastTransitionTime, False or Unknown); nullopt while Ready, unbound, or the Node unknown.
  std::optional<WallTime> nodeNotReadySince;
  WallTime created{};
};

struct DatasetState {
  std::string name;
  bool exists = false;
  std::optional<api::DatasetPhase> phase;             // status.phase; nullopt when none or unknown
  api::WarmPolicy warm = api::WarmPolicy::kOnCreate;  // spec.cache.warm
  int64_t totalBytes = 0;
  std::map<std::string, int64_t> cachedBytesByNode;
  // status.version of the Dataset that caches it (its source, for a reference); 0 when none yet.
  int64_t version = 0;
};

struct JobObservation {
  std::string jobName;  // names the workers in an elastic job's membership changes
  api::TrainingJobSpec spec;
  int64_t generation = 1;
  kube::Json previousStatus;  // the job's status (null when none)
  std::vector<WorkerState> workers;
  std::vector<DatasetState> datasets;  // one per spec.datasets entry
  WallTime created{};
  WallTime now{};
};

struct JobEvent {
  bool warning = false;
  std::string reason, message;
};

struct JobPlan {
  std::vector<int> create;             // ranks to create, in the current attempt
  std::vector<std::string> remove;     // pods to delete
  std::vector<std::string> removeNow;  // pods to delete without grace: their node is lost
  // An elastic job's workers lost in this plan, whose agents its rendezvous store is told are
  // gone, so that the others meet again at once.
  std::vector<std::string> goneFromRendezvous;
  bool deleteJob = false;  // ttlSecondsAfterFinished passed
  kube::Json status;
  std::vector<JobEvent> events;
  std::optional<std::chrono::seconds> requeueAfter;  // a deadline to check
  // An elastic job's membership changes this plan records (api::membershipKindName each), and
  // for each replacement that joined, the seconds from its worker's loss to it running.
  std::vector<std::string> membershipChanges;
  std::vector<double> recoverySeconds;
};

JobPlan planJob(const JobObservation& observation);

}  // namespace granary::op
