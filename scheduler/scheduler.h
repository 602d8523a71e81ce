// granary-scheduler's Kubernetes side: watches pods, nodes, Datasets and TrainingJobs; places
// each job's pending workers as a gang (scheduler/core/placement.h); binds them through
// pods/binding; explains failures with PodScheduled=False and an Event.
//
// Reconcile key: "namespace/job" for pods labelled granary.io/job-name, "pod:namespace/name" for
// lone pods. A gang is placed when every worker the job expects exists; members already bound
// count as placed. Binding cannot be undone in Kubernetes, so a bind that fails releases only
// that worker, which is placed again on the next attempt.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "common/kube/manager.h"
#include "common/metrics.h"
#include "common/names.h"
#include "common/thread_annotations.h"
#include "scheduler/core/cluster_state.h"
#include "scheduler/core/placement.h"
#include "scheduler/extender.h"

namespace granary::scheduler {

struct SchedulerOptions {
  // Pods with this spec.schedulerName are ours. Default granary-scheduler.
  std::string schedulerName = names::kScheduler;
  // How soon an unplaceable gang is tried again (nodes and caches change). Default 5 s.
  std::chrono::milliseconds retryInterval{5000};
  ScoreWeights weights{};
  // Concurrent gang placements. Default 1: gangs see each other's assumptions in order.
  int workers = 1;
};

struct SchedulerMetrics {
  static Result<SchedulerMetrics> declare(MetricsRegistry& registry);
  CounterFamily attempts;  // {result}: scheduled | unschedulable | error
  HistogramFamily attemptSeconds;
  HistogramFamily gangWaitSeconds;  // first worker created → last worker bound
  CounterFamily boundPods;
  HistogramFamily locality;  // bytes-weighted cached fraction at bind, per pod
};

class Scheduler {
 public:
  // Registers informers and the controller with `manager`; they run with manager.run().
  static Result<std::unique_ptr<Scheduler>> create(kube::Manager& manager, SchedulerOptions options,
                                                   MetricsRegistry& registry);

  const ClusterState& state() const { return state_; }
  // The datasets and locality of a pod's TrainingJob (for the extender).
  PodData podData(const kube::Json& pod) const;

 private:
  Scheduler(kube::Manager& manager, SchedulerOptions options, SchedulerMetrics metrics);
  void wire();
  Result<kube::ReconcileResult> reconcile(const std::string& key);
  void explain(const std::vector<kube::ObjectPtr>& pods, const std::string& reason);
  // Recounts, per node, the datasets cached there (on Dataset changes only), and updates the
  // nodes whose count changed.
  void refreshCachedDatasets();
  void upsertNode(const kube::Json& node);
  PodData jobData(const std::string& gangKey) const;

  kube::Manager& manager_;
  SchedulerOptions options_;
  SchedulerMetrics metrics_;
  ClusterState state_;
  kube::Informer* pods_ = nullptr;
  kube::Informer* nodes_ = nullptr;
  kube::Informer* datasets_ = nullptr;
  kube::Informer* jobs_ = nullptr;
  kube::Controller* controller_ = nullptr;
  Mutex cachedDatasetsMutex_;
  // Node → datasets cached there.
  std::map<std::string, std::vector<std::string>> cachedDatasets_
      GRANARY_GUARDED_BY(cachedDatasetsMutex_);
  Mutex explainedMutex_;
  // Pod key → last reason written.
  std::map<std::string, std::string> explained_ GRANARY_GUARDED_BY(explainedMutex_);
};

// The reconcile key of a pending pod: "ns/job" for a TrainingJob's workers (one gang),
// "ns/job#pod" for an elastic job's worker beyond spec.workers (names::kSurplusLabel: placed on
// its own), "pod:ns/name" for any other pod.
std::string gangKeyOf(const kube::Json& pod);

}  // namespace granary::scheduler
