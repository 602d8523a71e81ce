// Refresh and versions of a Dataset (docs/operator.md, "Refresh and versions"): when the operator
// asks a cache node to list the origin again (spec.refresh.interval, or a new value of the
// granary.io/refresh-requested annotation), and what the Dataset's status says of it. The version
// served is the cache generation (operator/core/cache_generation.h); a refresh that finds the
// origin changed makes the next one, which the nodes are then ensured with. Pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/kube/object.h"
#include "common/result.h"
#include "operator/core/dataset_plan.h"

namespace granary::op {

struct RefreshObservation {
  std::optional<std::chrono::nanoseconds> interval;  // spec.refresh.interval
  std::string requested;   // the granary.io/refresh-requested annotation; "" when absent
  kube::Json previous;     // the Dataset's status
  int64_t version = 0;     // the cache generation served
  int64_t generation = 0;  // metadata.generation
  bool settled = false;    // the version served is settled (Ready, OnDemand, QuotaFull)
  std::chrono::system_clock::time_point now;
};

// A refresh to ask a cache node for: of the version served into version `next`.
struct RefreshAsk {
  int64_t next = 0;
  std::string lister;  // the node that lists `next`, when known from an earlier answer
};

// The refresh to ask for now: the one running (polled until it ends), one requested by a new
// annotation value, one the interval makes due, or one failed and due to be tried again. None
// while the version served is not settled, but for one running.
std::optional<RefreshAsk> refreshToAsk(const RefreshObservation& o);

// What the node that lists `next` said (RefreshDataset), in plain terms.
struct RefreshAnswer {
  enum class State { kRunning, kChanged, kUnchanged, kFailed };
  State state = State::kRunning;
  std::string lister;    // the node that answered
  bool started = false;  // kRunning: this ask started it
  int64_t listed = 0, added = 0, changed = 0, removed = 0;
  std::string message;  // kFailed: why
};

struct RefreshStep {
  // `status` with status.refresh, status.version and status.versionTime; a new version also
  // sets status.cacheGeneration to it (and the phase Listing, until the nodes report on it), and
  // a failure the RefreshFailed condition.
  kube::Json status;
  bool newVersion = false;  // ensure the nodes with status.cacheGeneration now
  std::optional<DatasetEvent> event;
  std::optional<std::chrono::milliseconds> requeueAfter;  // sooner than the plan's
};

// `status` (the plan's) with the refresh's state: carried over from o.previous when nothing was
// asked or the refresh just started (looked at again in a second: a short refresh writes only
// its outcome), else what `answer` says (an error: the node could not be asked, counted as a
// failure).
RefreshStep refreshStep(const RefreshObservation& o, kube::Json status,
                        const std::optional<RefreshAsk>& ask, const Result<RefreshAnswer>& answer);

// The Warning Event naming files of `version` the origin no longer has as they were listed
// (removed or changed since; a node could not serve a read of them from the cache).
DatasetEvent goneFromOriginEvent(int64_t version, const std::vector<std::string>& paths);

// The versions of Dataset `name` that `jobs` (TrainingJobs that name it) read and that have not
// ended: their status.datasetVersions.
std::set<int64_t> versionsPinnedBy(const std::vector<kube::ObjectPtr>& jobs,
                                   const std::string& name);

// How long after the n-th refresh failure in a row the next try comes: 30 s, doubling, at most
// 10 minutes.
std::chrono::seconds refreshBackoff(int failures);

}  // namespace granary::op
