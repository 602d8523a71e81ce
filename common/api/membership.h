// An elastic TrainingJob's membership: what a lost worker costs, and the record of changes the
// job's status and granaryctl run's view show. Pure, the same on a cluster and locally.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/api/training_job.h"

namespace granary::api {

// What the job does when a worker is lost (it failed, was killed, evicted or preempted).
enum class LossResponse {
  kReplace,      // elastic, at least minWorkers left: the rest go on, a new worker joins them
  kContinue,     // the same, with no replacement (restartPolicy or backoffLimit allows none)
  kGangRestart,  // every worker starts again
  kFail,         // the job fails
};

// `remaining`: the workers still running without the lost one. `restartable`: runPolicy's
// restartPolicy allows a restart for this exit; `budgetLeft`: backoffLimit is not used up
// (a replacement counts against it as a gang restart does).
LossResponse respondToLoss(const TrainingJobSpec& spec, int remaining, bool restartable,
                           bool budgetLeft);

std::string_view lossResponseName(LossResponse response);

struct MembershipChange {
  enum class Kind { kLost, kJoined, kGangRestart };
  Kind kind = Kind::kLost;
  std::chrono::system_clock::time_point at;
  std::string worker;  // "" for a gang restart
  std::string cause;   // "killed by SIGKILL", "replacement", "exit 1: gang restart", ...
  int running = 0;     // workers running after the change
};

std::string_view membershipKindName(MembershipChange::Kind kind);

// The changes so far (the newest kMaxKept), the workers running, and how long the job ran
// with fewer than it wants.
class Membership {
 public:
  static constexpr size_t kMaxKept = 32;
  using Time = std::chrono::system_clock::time_point;

  Membership(int wanted, int running, Time now);

  void lost(const std::string& worker, const std::string& cause, Time now);
  void joined(const std::string& worker, const std::string& cause, Time now);
  // Every worker stopped and started again: running becomes `wanted` once they are back.
  void gangRestart(const std::string& cause, Time now);

  int running() const { return running_; }
  int wanted() const { return wanted_; }
  int64_t changeCount() const { return count_; }
  const std::vector<MembershipChange>& changes() const { return changes_; }
  std::chrono::duration<double> timeBelowWanted(Time now) const;

 private:
  void record(MembershipChange change);
  void setRunning(int running, Time now);

  int wanted_;
  int running_;
  int64_t count_ = 0;
  std::vector<MembershipChange> changes_;
  std::chrono::duration<double> below_{0};
  std::optional<Time> belowSince_;
};

}  // namespace granary::api
