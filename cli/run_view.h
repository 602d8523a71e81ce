// What `granaryctl run` shows: the live view (a block redrawn every second on a terminal, or
// timestamped lines otherwise) and the summary at the end. Pure formatting of snapshots.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/api/membership.h"

namespace granary::cli {

struct WorkerView {
  std::string name;
  std::string state;                     // "running", "exited 0", "waiting for data", ...
  double readBytesPerSecond = 0;         // over the last period
  double dataWaitShare = 0;              // 0..1 of the last period with a read blocked
  std::optional<double> gpuUtilization;  // 0..1, the mean of its GPUs; none: "no GPU"
  std::string lastLine;                  // its output's last line
};

// An elastic job's workers: running of wanted, and the membership changes so far.
struct MembershipView {
  int running = 0, wanted = 0;
  int64_t changes = 0;
};

struct RunView {
  std::string job;  // namespace/name
  double elapsedSeconds = 0;
  int attempt = 1, attempts = 1;             // the gang's attempt and how many backoffLimit allows
  std::optional<MembershipView> membership;  // an elastic job's
  std::vector<std::string> datasets;         // a progress line each
  std::vector<WorkerView> workers;
};

// One line per dataset and per worker under a heading line; no line is wider than `width`.
std::vector<std::string> liveViewLines(const RunView& view, size_t width);

struct WorkerSummary {
  std::string name;
  std::string outcome;  // "exit 0", "killed by SIGTERM", "still running"
  int64_t bytesRead = 0;
  double dataWaitSeconds = 0;
  double runSeconds = 0;                 // how long its processes ran, attempts together
  std::optional<double> gpuUtilization;  // the mean over the run; none: "no GPU"
};

struct MembershipSummary {
  int wanted = 0;
  double secondsBelowWanted = 0;
  std::vector<api::MembershipChange> changes;  // oldest first
};

struct RunSummary {
  std::string job;
  std::string outcome;  // "Succeeded", "Failed: worker-1 exited 3", ...
  double wallSeconds = 0;
  int restarts = 0;  // gang restarts, and an elastic job's workers started again
  std::optional<MembershipSummary> membership;  // an elastic job's
  int64_t localBytes = 0, peerBytes = 0, originBytes = 0;
  std::vector<std::string> datasets;
  std::vector<WorkerSummary> workers;
};

std::vector<std::string> summaryLines(const RunSummary& summary);

// "1m52s", "42.3s".
std::string formatDuration(double seconds);

}  // namespace granary::cli
