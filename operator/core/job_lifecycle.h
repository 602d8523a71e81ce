// The TrainingJob lifecycle planner (planJob): what the controller does next, from what it
// sees: create missing workers, restart the whole gang after a failure (up to backoffLimit),
// fail on deadlines, finish, clean up, suspend and resume; and the job's status. Pure: the
// controller applies the plan.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/api/training_job.h"
#include "common/kube/object.h"

namespace granary::op {

using WallTime = std::chrono::system_clock::time_point;

struct WorkerState {
  std::string name;
  std::string uid;
  int rank = 0;
  int attempt = 0;  // the gang attempt it was created for
  enum class Phase { kPending, kRunning, kSucceeded, kFailed } phase = Phase::kPending;
  bool ready = false;
  int exitCode = 0;           // of a failed worker's first failed container
  std::string waitingReason;  // e.g. ImagePullBackOff
  std::string node;
  WallTime created{};
};

struct DatasetState {
  std::string name;
  bool exists = false;
  std::string phase;  // status.phase
  int64_t totalBytes = 0;
  std::map<std::string, int64_t> cachedBytesByNode;
};

struct JobObservation {
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
  std::vector<int> create;          // ranks to create, in the current attempt
  std::vector<std::string> remove;  // pods to delete
  bool deleteJob = false;           // ttlSecondsAfterFinished passed
  kube::Json status;
  std::vector<JobEvent> events;
  std::optional<std::chrono::seconds> requeueAfter;  // a deadline to check
};

JobPlan planJob(const JobObservation& observation);

}  // namespace granary::op
