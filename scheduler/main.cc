// granary-scheduler: gang placement where the data is cached (a secondary scheduler for pods
// with spec.schedulerName: granary-scheduler), and the same scoring as a kube-scheduler
// extender.
#include "common/flags.h"
#include "common/kube/bootstrap.h"
#include "common/log.h"
#include "common/names.h"
#include "common/termination.h"
#include "scheduler/extender.h"
#include "scheduler/scheduler.h"

int main(int argc, char** argv) {
  using namespace granary;
  std::stop_source stop = stopOnTerminationSignals();

  CLI::App app("granary-scheduler: gang placement where the data is cached", names::kScheduler);
  kube::ControlPlaneFlags plane{.metricsAddress = names::anyAddress(names::kSchedulerMetricsPort)};
  std::string schedulerName = names::kScheduler;
  std::string extenderAddress = names::anyAddress(names::kSchedulerExtenderPort);
  kube::addControlPlaneFlags(app, plane, "named by --scheduler-name");
  app.add_option("--scheduler-name", schedulerName, "pods to schedule (their spec.schedulerName)")
      ->capture_default_str();
  app.add_option("--extender-address", extenderAddress,
                 "host:port of the kube-scheduler extender; \"\" disables it")
      ->capture_default_str();
  if (auto exit = parseCommandLine(app, argc, argv)) return *exit;

  auto started = kube::ControlPlane::start(plane, schedulerName);
  const Logger log("scheduler");
  if (!started.isOk()) {
    log.error("cannot start", {{"error", started.status()}});
    return 1;
  }
  kube::ControlPlane& control = **started;
  auto scheduler = scheduler::Scheduler::create(control.manager(), {.schedulerName = schedulerName},
                                                control.registry());
  if (!scheduler.isOk()) {
    log.error("cannot start", {{"error", scheduler.status()}});
    return 1;
  }
  scheduler::Extender extender((*scheduler)->state(),
                               [&](const kube::Json& pod) { return (*scheduler)->podData(pod); });
  std::unique_ptr<scheduler::ExtenderServer> extenderServer;
  if (!extenderAddress.empty()) {
    auto served = scheduler::ExtenderServer::start(extenderAddress, extender);
    if (!served.isOk()) {
      log.error("cannot serve the extender", {{"error", served.status()}});
      return 1;
    }
    extenderServer = std::move(*served);
  }
  log.info("started", {{"scheduler", schedulerName},
                       {"metrics", plane.metricsAddress},
                       {"extender", extenderAddress}});
  return control.run(stop.get_token());
}
