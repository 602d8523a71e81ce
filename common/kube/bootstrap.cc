#include "common/kube/bootstrap.h"

#include "common/flags.h"
#include "common/kube/leader_election.h"
#include "common/kube/rest_config.h"
#include "common/kube/runtime_metrics.h"
#include "common/log.h"

namespace granary::kube {

void addControlPlaneFlags(CLI::App& app, ControlPlaneFlags& flags, const std::string& leaseName) {
  app.add_option("--kubeconfig", flags.kubeconfig,
                 "kubeconfig to use (default: the in-cluster service account)");
  app.add_option("--context", flags.context, "kubeconfig context (default: current-context)");
  app.add_option("--metrics-address", flags.metricsAddress,
                 "host:port of /metrics, /healthz and /readyz")
      ->capture_default_str();
  app.add_flag("--leader-elect", flags.leaderElect,
               "elect a leader among replicas (Lease " + leaseName + ")");
  app.add_option("--namespace", flags.leaseNamespace,
                 "namespace of the Lease (default: the pod's namespace)");
  addLogLevelFlag(app, flags.logLevel);
}

Result<std::unique_ptr<ControlPlane>> ControlPlane::start(const ControlPlaneFlags& flags,
                                                          const std::string& component) {
  configureLoggingAt(flags.logLevel);
  auto config = loadRestConfig(flags.kubeconfig, flags.context);
  if (!config.isOk()) return config.status().withContext("cannot reach Kubernetes");
  std::unique_ptr<ControlPlane> plane(new ControlPlane());
  plane->component_ = component;
  GRANARY_RETURN_IF_ERROR(declareBuildInfo(plane->registry_, component));
  auto client = createCountedClient(*config, plane->registry_);
  if (!client.isOk()) return client.status().withContext("cannot create the Kubernetes client");
  plane->client_ = std::move(*client);
  ManagerOptions options{.metricsAddress = flags.metricsAddress, .component = component};
  if (flags.leaderElect) {
    options.leaderElection = LeaderElectionOptions{
        .ns = flags.leaseNamespace.empty() ? config->namespace_ : flags.leaseNamespace,
        .name = component,
        .identity = candidateIdentity()};
  }
  auto manager = Manager::create(*plane->client_, options, plane->registry_);
  if (!manager.isOk()) return manager.status().withContext("cannot start");
  plane->manager_ = std::move(*manager);
  return plane;
}

int ControlPlane::run(std::stop_token stop) {
  const Logger log(component_);
  const Status result = manager_->run(std::move(stop));
  if (!result.isOk()) {
    log.error("stopped", {{"error", result}});
    return 1;
  }
  log.info("stopped");
  return 0;
}

}  // namespace granary::kube
