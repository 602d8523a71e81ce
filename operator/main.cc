// granary-operator: the Dataset and TrainingJob controllers.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "common/files.h"
#include "common/flags.h"
#include "common/kube/bootstrap.h"
#include "common/kube/object.h"
#include "common/log.h"
#include "common/names.h"
#include "common/origin_roots.h"
#include "common/termination.h"
#include "operator/dataset_controller.h"
#include "operator/training_job_controller.h"

namespace {

// The operator's own flags; the Kubernetes ones are kube::ControlPlaneFlags.
struct OperatorFlags {
  std::string tokenFile;
  std::string caFile;
  std::string cacheNodeSelector = granary::names::kCacheNodeSelector;
  std::string cacheNodeNamespace;
  std::string watchNamespace;
  int datasetWorkers = 4;
  int jobWorkers = 4;
  int telemetrySeconds = 20;
  // The cache nodes' checkpointOriginRoots, a JSON list of strings (as the nodes' options file
  // has it; never empty, so that the flag cannot take the next argument as its value); unset:
  // unknown (no CheckpointUriRefused condition). "[]": the nodes refuse every file:// checkpoint.
  std::optional<std::string> checkpointOriginRoots;
};

void addOperatorFlags(CLI::App& app, OperatorFlags& flags) {
  app.add_option("--cache-node-token-file", flags.tokenFile, "the cache nodes' API token")
      ->required()
      ->check(CLI::ExistingFile);
  app.add_option("--cache-node-ca-file", flags.caFile,
                 "CA of the cache nodes' TLS certificates (default: plain gRPC)")
      ->check(CLI::ExistingFile);
  app.add_option("--cache-node-selector", flags.cacheNodeSelector,
                 "labels of the granary-cache-node pods")
      ->capture_default_str();
  app.add_option("--cache-node-namespace", flags.cacheNodeNamespace,
                 "namespace of the granary-cache-node pods (default: all)");
  app.add_option("--watch-namespace", flags.watchNamespace,
                 "reconcile the Datasets and TrainingJobs of this namespace only (default: all)");
  app.add_option("--dataset-workers", flags.datasetWorkers, "concurrent Dataset reconciles")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--job-workers", flags.jobWorkers, "concurrent TrainingJob reconciles")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--telemetry-interval", flags.telemetrySeconds,
                 "seconds between samples of running jobs' data figures from the cache nodes")
      ->capture_default_str()
      ->check(CLI::Range(5, 3600));
  app.add_option("--checkpoint-origin-roots", flags.checkpointOriginRoots,
                 "the cache nodes' checkpointOriginRoots as a JSON list, e.g. "
                 "'[\"/srv/ckpt/{namespace}\", \"shared:/srv/x\"]': TrainingJobs whose file:// "
                 "checkpoints they refuse say so in their status (default: not said)");
}

// The roots --checkpoint-origin-roots names, or the reason it cannot be used.
granary::Result<std::optional<std::vector<granary::OriginRoot>>> checkpointRootsOf(
    const OperatorFlags& flags) {
  using Roots = std::optional<std::vector<granary::OriginRoot>>;
  if (!flags.checkpointOriginRoots) return Roots();
  const auto list = granary::kube::parseJson(*flags.checkpointOriginRoots);
  const granary::Status notAList = granary::invalidArgument(
      "--checkpoint-origin-roots: not a JSON list of strings, e.g. '[\"/srv/ckpt/{namespace}\"]' "
      "or '[]'");
  if (!list.isOk() || !list->is_array()) return notAList;
  std::vector<std::string> texts;
  for (const auto& root : list->as_array()) {
    if (!root.is_string()) return notAList;
    texts.push_back(root.as_string());
  }
  GRANARY_ASSIGN_OR_RETURN(auto roots,
                           granary::parseOriginRoots(texts, "--checkpoint-origin-roots"));
  return Roots(std::move(roots));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace granary;
  std::stop_source stop = stopOnTerminationSignals();

  CLI::App app("granary-operator: caches Datasets on the GPU nodes", names::kOperator);
  kube::ControlPlaneFlags plane{.metricsAddress = names::anyAddress(names::kOperatorMetricsPort)};
  OperatorFlags flags;
  kube::addControlPlaneFlags(app, plane, names::kOperator);
  addOperatorFlags(app, flags);
  if (auto exit = parseCommandLine(app, argc, argv)) return *exit;

  auto token = readSecretFile(flags.tokenFile);
  if (!token.isOk()) {
    std::fprintf(stderr, "granary-operator: --cache-node-token-file: %s\n",
                 token.status().message().c_str());
    return 2;
  }
  auto checkpointRoots = checkpointRootsOf(flags);
  if (!checkpointRoots.isOk()) {
    std::fprintf(stderr, "granary-operator: %s\n", checkpointRoots.status().message().c_str());
    return 2;
  }
  auto started = kube::ControlPlane::start(plane, names::kOperator);
  const Logger log("operator");
  if (!started.isOk()) {
    log.error("cannot start", {{"error", started.status()}});
    return 1;
  }
  kube::ControlPlane& control = **started;
  auto cacheNodeRequests = op::declareCacheNodeRequests(control.registry());
  if (!cacheNodeRequests.isOk()) {
    log.error("cannot declare metrics", {{"error", cacheNodeRequests.status()}});
    return 1;
  }
  auto jobSeries = op::declareJobSeries(control.registry());
  if (!jobSeries.isOk()) {
    log.error("cannot declare metrics", {{"error", jobSeries.status()}});
    return 1;
  }
  op::CacheNodeClient cacheNodes(
      {.token = *token, .tlsCaFile = flags.caFile, .requests = *cacheNodeRequests});
  op::DatasetController datasets(control.manager(), cacheNodes, flags.cacheNodeSelector,
                                 {.workers = flags.datasetWorkers,
                                  .ns = flags.watchNamespace,
                                  .cacheNodeNamespace = flags.cacheNodeNamespace});
  op::TrainingJobController jobs(control.manager(),
                                 {.workers = flags.jobWorkers,
                                  .ns = flags.watchNamespace,
                                  .cacheNodeNamespace = flags.cacheNodeNamespace,
                                  .cacheNodes = &cacheNodes,
                                  .cacheNodeSelector = flags.cacheNodeSelector,
                                  .telemetryInterval = std::chrono::seconds(flags.telemetrySeconds),
                                  .series = *jobSeries,
                                  .checkpointRoots = std::move(*checkpointRoots),
                                  // the stores' notice tokens, derived from the operator's own
                                  // secret (a different derivation: the token stays unknown)
                                  .rendezvousKey = "rendezvous notices: " + token->reveal()});
  log.info("started", {{"metrics", plane.metricsAddress},
                       {"cacheNodes", flags.cacheNodeSelector},
                       {"namespace", flags.watchNamespace.empty() ? "all" : flags.watchNamespace}});
  return control.run(stop.get_token());
}
