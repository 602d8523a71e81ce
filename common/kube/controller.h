// A controller: a work queue of object keys fed by informer handlers, and workers that call a
// level-triggered reconcile function for one key at a time. Errors requeue the key with
// backoff; results may ask for a requeue, now or after a delay.
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/kube/informer.h"
#include "common/kube/runtime_metrics.h"
#include "common/kube/work_queue.h"
#include "common/result.h"

namespace granary::kube {

struct ReconcileResult {
  bool requeue = false;             // again, with the key's backoff
  Clock::Duration requeueAfter{0};  // again after this long (takes precedence)
};

// Brings the world in line with the object named by `key` ("namespace/name"). Called for one
// key on one worker at a time. NotFound of the object itself means it is gone: return OK.
using Reconciler = std::function<Result<ReconcileResult>(const std::string& key, std::stop_token)>;

struct ControllerOptions {
  std::string name;  // for metrics and logs, e.g. "dataset"
  // Concurrent reconciles (different keys). Default 2.
  int workers = 2;
  RateLimitOptions rateLimits{};
};

class Controller {
 public:
  Controller(ControllerOptions options, Reconciler reconciler, Clock& clock,
             const RuntimeMetrics* metrics);

  const std::string& name() const { return options_.name; }
  WorkQueue& queue() { return queue_; }

  // A handler that enqueues the key of every added, updated or deleted object.
  EventHandler enqueueObjects();
  // A handler that enqueues the keys `map` derives from each object (e.g. its owner's key).
  EventHandler enqueueMapped(std::function<std::vector<std::string>(const Json&)> map);
  // As enqueueObjects, but an update that changed only the object's status is not enqueued
  // (changedBesidesStatus): for the controller's own resource, whose status it writes itself
  // and whose progress it polls with requeueAfter.
  EventHandler enqueueOnChange();
  void enqueue(const std::string& key);

  // Runs the workers until `stop`; then shuts the queue down and waits for them.
  void run(std::stop_token stop);

 private:
  void work(std::stop_token stop);

  ControllerOptions options_;
  Reconciler reconciler_;
  Clock& clock_;
  const RuntimeMetrics* metrics_;
  WorkQueue queue_;
};

}  // namespace granary::kube
