// What the control-plane binaries (granary-operator, granary-scheduler) share before their own
// controllers: the flags that reach Kubernetes, serve metrics and elect a leader, and the
// counted client and manager made from them.
//
//   ControlPlaneFlags flags{.metricsAddress = names::anyAddress(names::kOperatorMetricsPort)};
//   addControlPlaneFlags(app, flags, names::kOperator);
//   ... parse ...
//   auto plane = ControlPlane::start(flags, names::kOperator);
//   ... add controllers to (*plane)->manager() ...
//   return (*plane)->run(stop.get_token());
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <stop_token>
#include <string>

#include "common/kube/client.h"
#include "common/kube/manager.h"
#include "common/metrics.h"
#include "common/result.h"

namespace granary::kube {

struct ControlPlaneFlags {
  std::string kubeconfig;         // --kubeconfig; "" uses the pod's service account
  std::string context;            // --context; "" uses the kubeconfig's current-context
  std::string metricsAddress;     // --metrics-address of /metrics, /healthz, /readyz; "" none
  bool leaderElect = false;       // --leader-elect: one active replica, through a Lease
  std::string leaseNamespace;     // --namespace of the Lease; "" is the pod's namespace
  std::string logLevel = "info";  // --log-level
};

// Declares the flags above on `app`; `leaseName` is named in --leader-elect's help.
void addControlPlaneFlags(CLI::App& app, ControlPlaneFlags& flags, const std::string& leaseName);

// The client and manager of one control-plane process. Not movable: the manager holds
// references to the client and the registry.
class ControlPlane {
 public:
  // Configures logging at flags.logLevel, loads the REST config, makes a client whose requests
  // are counted in registry(), and a manager serving flags.metricsAddress and, with
  // flags.leaderElect, electing a leader on the Lease `component`. Errors name the step.
  static Result<std::unique_ptr<ControlPlane>> start(const ControlPlaneFlags& flags,
                                                     const std::string& component);

  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  MetricsRegistry& registry() { return registry_; }
  Client& client() { return *client_; }
  Manager& manager() { return *manager_; }

  // Runs the manager until `stop`, logging the end; the process exit code (0, or 1 on error).
  int run(std::stop_token stop);

 private:
  ControlPlane() = default;

  std::string component_;
  MetricsRegistry registry_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Manager> manager_;
};

}  // namespace granary::kube
