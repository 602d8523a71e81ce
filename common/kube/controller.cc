#include "common/kube/controller.h"

#include <thread>

#include "common/log.h"

namespace granary::kube {

Controller::Controller(ControllerOptions options, Reconciler reconciler, Clock& clock,
                       const RuntimeMetrics* metrics)
    : options_(std::move(options)),
      reconciler_(std::move(reconciler)),
      clock_(clock),
      metrics_(metrics),
      queue_(clock, options_.rateLimits) {
  if (!metrics_) return;
  // Every series a dashboard divides or sums exists at 0 from the start: a rate of errors
  // over reconciles is then 0 while nothing fails, not "no data".
  for (const char* outcome : {"success", "requeue", "error", "terminal"}) {
    metrics_->reconciles.with({options_.name, outcome});
  }
  metrics_->queueRetries.with({options_.name});
  metrics_->queueDepth.with({options_.name}).set(0);
}

void Controller::enqueue(const std::string& key) {
  queue_.add(key);
  if (metrics_)
    metrics_->queueDepth.with({options_.name}).set(static_cast<double>(queue_.length()));
}

EventHandler Controller::enqueueObjects() {
  return enqueueMapped(
      [](const Json& object) { return std::vector<std::string>{objectKey(object)}; });
}

EventHandler Controller::enqueueMapped(std::function<std::vector<std::string>(const Json&)> map) {
  auto each = [this, map](const ObjectPtr& object) {
    for (const auto& key : map(*object)) enqueue(key);
  };
  return {.onAdd = each,
          .onUpdate = [each](const ObjectPtr&, const ObjectPtr& object) { each(object); },
          .onDelete = each};
}

EventHandler Controller::enqueueOnChange() {
  EventHandler handler = enqueueObjects();
  handler.onUpdate = [this](const ObjectPtr& previous, const ObjectPtr& object) {
    if (!previous || changedBesidesStatus(*previous, *object)) enqueue(objectKey(*object));
  };
  return handler;
}

void Controller::run(std::stop_token stop) {
  std::stop_callback onStop(stop, [this] { queue_.shutDown(); });
  std::vector<std::thread> workers;
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers.emplace_back([this, stop] { work(stop); });
  }
  // Workers return once the queue is shut down (on stop) and drained.
  for (auto& worker : workers) worker.join();
}

const char* Controller::settle(const std::string& key, const Result<ReconcileResult>& result) {
  static const Logger log("controller");
  if (!result.isOk() && result.status().code() == StatusCode::kConflict) {
    // A write raced another (the informer's copy was older than the server's): the next try
    // reads the newer copy. Expected under load, so neither a warning nor an error.
    log.debug("conflict; reconciling again from the newer copy",
              {{"controller", options_.name}, {"key", key}, {"error", result.status()}});
    queue_.addRateLimited(key);
    if (metrics_) metrics_->queueRetries.with({options_.name}).increment();
    return "requeue";
  }
  if (!result.isOk()) {
    log.warn("reconcile failed; retrying with backoff",
             {{"controller", options_.name}, {"key", key}, {"error", result.status()}});
    queue_.addRateLimited(key);
    if (metrics_) metrics_->queueRetries.with({options_.name}).increment();
    return "error";
  }
  queue_.forget(key);
  if (result->isTerminal()) {
    log.error("reconcile failed; not retried until the object changes",
              {{"controller", options_.name}, {"key", key}, {"error", result->terminalError}});
    return "terminal";
  }
  if (result->requeueAfter > Clock::Duration::zero()) {
    queue_.addAfter(key, result->requeueAfter);
    return "requeue";
  }
  return "success";
}

void Controller::work(std::stop_token stop) {
  while (auto item = queue_.get()) {
    const std::string& key = item->key;
    const auto started = clock_.monoNow();
    Result<ReconcileResult> result = reconciler_(key, stop);
    const double seconds = std::chrono::duration<double>(clock_.monoNow() - started).count();
    const char* outcome = settle(key, result);
    queue_.done(key);
    if (metrics_) {
      metrics_->reconciles.with({options_.name, outcome}).increment();
      metrics_->reconcileDuration.with({options_.name}).observe(seconds);
      metrics_->queueLatency.with({options_.name})
          .observe(std::chrono::duration<double>(item->waited).count());
      metrics_->queueDepth.with({options_.name}).set(static_cast<double>(queue_.length()));
    }
  }
}

}  // namespace granary::kube
