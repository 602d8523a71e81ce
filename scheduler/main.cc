// granary-scheduler: gang placement where the data is cached (a secondary scheduler for pods
// with spec.schedulerName: granary-scheduler), and the same scoring as a kube-scheduler
// extender.
#include <cstdio>
#include <string>
#include <thread>

#include "common/kube/manager.h"
#include "common/kube/runtime_metrics.h"
#include "common/log.h"
#include "common/termination.h"
#include "scheduler/extender.h"
#include "scheduler/scheduler.h"

namespace {

constexpr const char* kUsage = R"(granary-scheduler: gang placement where the data is cached

Options:
  --kubeconfig PATH         kubeconfig to use (default: in-cluster service account)
  --context NAME            kubeconfig context (default: current-context)
  --scheduler-name NAME     pods to schedule (default: granary-scheduler)
  --metrics-address ADDR    /metrics, /healthz, /readyz (default: 0.0.0.0:8080)
  --extender-address ADDR   kube-scheduler extender; "" disables (default: 0.0.0.0:8888)
  --leader-elect            elect a leader among replicas (Lease granary-scheduler)
  --namespace NS            namespace of the Lease (default: the pod's namespace)
  --log-level LEVEL         debug, info, warn or error (default: info)
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace granary;
  std::stop_source stop = stopOnTerminationSignals();

  std::string kubeconfig, context, metricsAddress = "0.0.0.0:8080",
                                   extenderAddress = "0.0.0.0:8888";
  std::string schedulerName = "granary-scheduler", leaseNamespace, level = "info";
  bool leaderElect = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](std::string& into) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "granary-scheduler: %s needs a value\n\n%s", arg.c_str(), kUsage);
        std::exit(2);
      }
      into = argv[++i];
    };
    if (arg == "--kubeconfig")
      value(kubeconfig);
    else if (arg == "--context")
      value(context);
    else if (arg == "--scheduler-name")
      value(schedulerName);
    else if (arg == "--metrics-address")
      value(metricsAddress);
    else if (arg == "--extender-address")
      value(extenderAddress);
    else if (arg == "--namespace")
      value(leaseNamespace);
    else if (arg == "--log-level")
      value(level);
    else if (arg == "--leader-elect")
      leaderElect = true;
    else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "granary-scheduler: unknown option %s\n\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }
  auto logLevel = parseLogLevel(level);
  if (!logLevel.isOk()) {
    std::fprintf(stderr, "granary-scheduler: --log-level: %s\n",
                 logLevel.status().message().c_str());
    return 2;
  }
  configureLogging({.level = *logLevel});
  const Logger log("scheduler");

  auto config = kube::loadRestConfig(kubeconfig, context);
  if (!config.isOk()) {
    log.error("cannot reach Kubernetes", {{"error", config.status()}});
    return 1;
  }
  MetricsRegistry registry;
  auto client = kube::createCountedClient(*config, registry);
  if (!client.isOk()) {
    log.error("cannot create the client", {{"error", client.status()}});
    return 1;
  }
  kube::ManagerOptions options{.metricsAddress = metricsAddress, .component = schedulerName};
  if (leaderElect) {
    options.leaderElection = kube::LeaderElectionOptions{
        .ns = leaseNamespace.empty() ? config->namespace_ : leaseNamespace,
        .name = schedulerName,
        .identity = kube::candidateIdentity()};
  }
  auto manager = kube::Manager::create(**client, options, registry);
  if (!manager.isOk()) {
    log.error("cannot start", {{"error", manager.status()}});
    return 1;
  }
  auto scheduler =
      scheduler::Scheduler::create(**manager, {.schedulerName = schedulerName}, registry);
  if (!scheduler.isOk()) {
    log.error("cannot start", {{"error", scheduler.status()}});
    return 1;
  }
  scheduler::Extender extender((*scheduler)->state(),
                               [&](const kube::Json& pod) { return (*scheduler)->podData(pod); });
  std::unique_ptr<scheduler::ExtenderServer> extenderServer;
  if (!extenderAddress.empty()) {
    auto started = scheduler::ExtenderServer::start(extenderAddress, extender);
    if (!started.isOk()) {
      log.error("cannot serve the extender", {{"error", started.status()}});
      return 1;
    }
    extenderServer = std::move(*started);
  }
  log.info(
      "started",
      {{"scheduler", schedulerName}, {"metrics", metricsAddress}, {"extender", extenderAddress}});
  const Status result = (*manager)->run(stop.get_token());
  if (!result.isOk()) {
    log.error("stopped", {{"error", result}});
    return 1;
  }
  log.info("stopped");
  return 0;
}
