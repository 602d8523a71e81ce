#include "common/kube/manager.h"

#include <thread>

#include "common/log.h"

namespace granary::kube {

Manager::Manager(Client& client, ManagerOptions options, RuntimeMetrics metrics)
    : client_(client),
      options_(std::move(options)),
      clock_(options_.clock ? *options_.clock : realClock()),
      metrics_(std::move(metrics)),
      recorder_(client, options_.component, clock_) {}

Manager::~Manager() = default;

Result<std::unique_ptr<Manager>> Manager::create(Client& client, ManagerOptions options,
                                                 MetricsRegistry& registry) {
  GRANARY_ASSIGN_OR_RETURN(RuntimeMetrics metrics, RuntimeMetrics::declare(registry));
  std::unique_ptr<Manager> manager(new Manager(client, std::move(options), std::move(metrics)));
  if (!manager->options_.metricsAddress.empty()) {
    GRANARY_ASSIGN_OR_RETURN(manager->server_,
                             MetricsServer::start(manager->options_.metricsAddress, registry));
    Manager* self = manager.get();
    manager->server_->addCheck("/healthz", [self] { return self->healthy(); });
    manager->server_->addCheck("/readyz", [self] { return self->ready(); });
  }
  return manager;
}

Informer& Manager::informer(const InformerOptions& options) {
  for (auto& existing : informers_) {
    const auto& o = existing.options();
    if (o.type == options.type && o.ns == options.ns && o.labelSelector == options.labelSelector &&
        o.fieldSelector == options.fieldSelector) {
      return existing;
    }
  }
  InformerOptions withMetrics = options;
  const std::string resource = options.type.plural;
  // At 0 from the start, so a dashboard's restart rate reads 0 rather than no data.
  metrics_.watchRestarts.with({resource});
  metrics_.relists.with({resource});
  withMetrics.onWatchRestart = [this, resource] {
    metrics_.watchRestarts.with({resource}).increment();
  };
  withMetrics.onRelist = [this, resource] { metrics_.relists.with({resource}).increment(); };
  return informers_.emplace_back(client_, std::move(withMetrics), clock_);
}

Controller& Manager::controller(ControllerOptions options, Reconciler reconciler) {
  return controllers_.emplace_back(std::move(options), std::move(reconciler), clock_, &metrics_);
}

Status Manager::healthy() const {
  return running_ ? Status::ok() : unavailable("the manager is not running");
}

Status Manager::ready() const {
  if (!running_) return unavailable("the manager is not running");
  if (options_.leaderElection && !leading_) return Status::ok();  // a standby
  for (const auto& informer : informers_) {
    if (!informer.hasSynced()) {
      return unavailable("informer for " + informer.options().type.plural + " has not synced");
    }
  }
  return Status::ok();
}

void Manager::runControllers(std::stop_token stop) {
  for (auto& informer : informers_) informer.start();
  for (auto& informer : informers_) {
    if (!informer.waitForSync(stop)) break;
  }
  if (!stop.stop_requested()) {
    std::vector<std::jthread> running;
    for (auto& controller : controllers_) {
      running.emplace_back([&controller, stop] { controller.run(stop); });
    }
    std::mutex mutex;
    std::condition_variable_any stopped;
    std::unique_lock lock(mutex);
    stopped.wait(lock, stop, [] { return false; });
  }  // every controller has returned
  for (auto& informer : informers_) informer.stop();
}

Status Manager::run(std::stop_token stop) {
  running_ = true;
  Status result;
  if (!options_.leaderElection) {
    runControllers(stop);
  } else {
    LeaderElector elector(client_, *options_.leaderElection, clock_);
    const std::string lease = options_.leaderElection->ns + "/" + options_.leaderElection->name;
    result = elector.run(
        [&](std::stop_token leadership) {
          leading_ = true;
          metrics_.leader.with({lease}).set(1);
          runControllers(leadership);
          leading_ = false;
          metrics_.leader.with({lease}).set(0);
        },
        stop);
  }
  running_ = false;
  return result;
}

}  // namespace granary::kube
