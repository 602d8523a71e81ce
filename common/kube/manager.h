// The controller manager: shared informers, controllers, an event recorder, optional leader
// election, and the /metrics, /healthz and /readyz endpoints.
//
//   auto manager = Manager::create(client, {.metricsAddress = ":8080"}, registry);
//   auto& datasets = manager->informer({.type = resources::datasets()});
//   auto& controller = manager->controller({.name = "dataset"}, reconcile);
//   datasets.addHandler(controller.enqueueObjects());
//   manager->run(stop);  // blocks
//
// run() serves the endpoints at once; informers and controllers start only while this process
// leads (or at once without leader election), reconciles begin after every informer synced, and
// losing the lease stops them all: run() then returns FailedPrecondition so the process exits and
// restarts as a candidate, as controller-runtime does.
#pragma once

#include <list>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "common/clock.h"
#include "common/kube/controller.h"
#include "common/kube/event_recorder.h"
#include "common/kube/informer.h"
#include "common/kube/leader_election.h"
#include "common/kube/runtime_metrics.h"
#include "common/metrics_server.h"

namespace granary::kube {

struct ManagerOptions {
  // host:port of /metrics, /healthz and /readyz; "" serves nothing. Default 0.0.0.0:8080.
  std::string metricsAddress = "0.0.0.0:8080";
  // Elect a leader before starting controllers; unset runs them at once.
  std::optional<LeaderElectionOptions> leaderElection;
  // The reporting component of Events. Default "granary".
  std::string component = "granary";
  // Null: realClock().
  Clock* clock = nullptr;
};

class Manager {
 public:
  // Declares the runtime's metrics in `registry`; starts no thread yet. Unavailable when the
  // metrics address cannot be bound.
  static Result<std::unique_ptr<Manager>> create(Client& client, ManagerOptions options,
                                                 MetricsRegistry& registry);
  ~Manager();

  // An informer for `options`; the same one for the same type, namespace and selectors.
  // Informers and controllers are registered before run(), from one thread.
  Informer& informer(const InformerOptions& options);
  Controller& controller(ControllerOptions options, Reconciler reconciler);
  EventRecorder& recorder() { return recorder_; }
  Client& client() { return client_; }

  // Blocks until `stop` (OK) or lost leadership (FailedPrecondition).
  Status run(std::stop_token stop);

  // /healthz: the manager is running. /readyz: every informer synced, or, when electing, a
  // standby waiting for the lease: a standby is ready to take over, so that a Deployment of
  // several replicas rolls out and `helm install --wait` ends (only the leader reconciles).
  Status healthy() const;
  Status ready() const;
  bool leading() const { return leading_; }
  // The clock every controller of this manager reads (ManagerOptions::clock).
  Clock& clock() const { return clock_; }
  uint16_t metricsPort() const { return server_ ? server_->port() : 0; }

 private:
  Manager(Client& client, ManagerOptions options, RuntimeMetrics metrics);
  // Starts informers, waits for their sync, runs controllers until `stop`.
  void runControllers(std::stop_token stop);

  Client& client_;
  ManagerOptions options_;
  Clock& clock_;
  RuntimeMetrics metrics_;
  EventRecorder recorder_;
  std::unique_ptr<MetricsServer> server_;
  std::list<Informer> informers_;  // stable addresses
  std::list<Controller> controllers_;
  std::atomic<bool> running_{false};
  std::atomic<bool> leading_{false};
};

}  // namespace granary::kube
