// A controller: a work queue of object keys fed by informer handlers, and workers that call a
// level-triggered reconcile function for one key at a time. What happens to the key next is
// what the reconcile returned (ReconcileResult).
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

// The outcome of one reconcile, one of four:
//  - done():          nothing more until an event enqueues the key again (result="success");
//  - after(d):        again after d, for progress polled or a deadline to check
//                     (result="requeue");
//  - a failed Result: a retryable error (the API server or a node unreachable): logged, and
//                     the key comes back with its per-key exponential backoff (result="error",
//                     granary_workqueue_retries_total). A Conflict (a write raced another: the
//                     informer's copy was older than the server's) comes back the same way but
//                     is expected, not a failure: logged at debug, result="requeue";
//  - terminal(error): an error retrying cannot fix (an invalid spec): logged, counted as
//                     result="terminal", and not retried; the next event for the key (the
//                     object changed) reconciles it again.
// A terminal error takes precedence over requeueAfter.
struct ReconcileResult {
  Clock::Duration requeueAfter{0};  // again after this long; zero: not unless an event comes
  Status terminalError;             // not OK: terminal

  static ReconcileResult done() { return {}; }
  static ReconcileResult after(Clock::Duration delay) { return {.requeueAfter = delay}; }
  // `error` must not be OK.
  static ReconcileResult terminal(Status error) { return {.terminalError = std::move(error)}; }
  bool isTerminal() const { return !terminalError.isOk(); }
};

// Brings the world in line with the object named by `key` ("namespace/name"). Called for one
// key on one worker at a time. NotFound of the object itself means it is gone: return done().
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
  // Queues `key` again as `result` asks; returns the metrics' result label.
  const char* settle(const std::string& key, const Result<ReconcileResult>& result);

  ControllerOptions options_;
  Reconciler reconciler_;
  Clock& clock_;
  const RuntimeMetrics* metrics_;
  WorkQueue queue_;
};

}  // namespace granary::kube
