// granary-operator: the Dataset and TrainingJob controllers.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "common/kube/manager.h"
#include "common/kube/runtime_metrics.h"
#include "common/log.h"
#include "common/termination.h"
#include "operator/dataset_controller.h"
#include "operator/training_job_controller.h"

namespace {

constexpr const char* kUsage = R"(granary-operator: caches Datasets on the GPU nodes

Options:
  --kubeconfig PATH            kubeconfig to use (default: in-cluster service account)
  --context NAME               kubeconfig context (default: current-context)
  --cache-node-token-file PATH the cache nodes' API token (required)
  --cache-node-ca-file PATH    CA of the cache nodes' TLS certificates (default: plain gRPC)
  --cache-node-selector SEL    labels of the granary-cache-node pods
                               (default: app.kubernetes.io/name=granary-cache-node)
  --cache-node-namespace NS    namespace of the granary-cache-node pods (default: all)
  --watch-namespace NS         reconcile the Datasets and TrainingJobs of NS only
                               (default: all namespaces)
  --dataset-workers N          concurrent Dataset reconciles (default: 4)
  --job-workers N              concurrent TrainingJob reconciles (default: 4)
  --telemetry-interval SECONDS how often running jobs' data figures are sampled
                               from the cache nodes into status (default: 20)
  --metrics-address ADDR       /metrics, /healthz, /readyz (default: 0.0.0.0:8080)
  --leader-elect               elect a leader among replicas (Lease granary-operator)
  --namespace NS               namespace of the Lease (default: the pod's namespace)
  --log-level LEVEL            debug, info, warn or error (default: info)
)";

[[noreturn]] void usageError(const std::string& message) {
  std::fprintf(stderr, "granary-operator: %s\n\n%s", message.c_str(), kUsage);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace granary;
  std::stop_source stop = stopOnTerminationSignals();

  std::string kubeconfig, context, tokenFile, caFile, leaseNamespace, level = "info";
  std::string selector = "app.kubernetes.io/name=granary-cache-node";
  std::string metricsAddress = "0.0.0.0:8080", datasetWorkersText = "4", jobWorkersText = "4";
  std::string watchNamespace, cacheNodeNamespace, telemetryText = "20";
  bool leaderElect = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](std::string& into) {
      if (i + 1 >= argc) usageError(arg + " needs a value");
      into = argv[++i];
    };
    if (arg == "--kubeconfig")
      value(kubeconfig);
    else if (arg == "--context")
      value(context);
    else if (arg == "--cache-node-token-file")
      value(tokenFile);
    else if (arg == "--cache-node-ca-file")
      value(caFile);
    else if (arg == "--cache-node-selector")
      value(selector);
    else if (arg == "--cache-node-namespace")
      value(cacheNodeNamespace);
    else if (arg == "--watch-namespace")
      value(watchNamespace);
    else if (arg == "--dataset-workers")
      value(datasetWorkersText);
    else if (arg == "--job-workers")
      value(jobWorkersText);
    else if (arg == "--telemetry-interval")
      value(telemetryText);
    else if (arg == "--metrics-address")
      value(metricsAddress);
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
      usageError("unknown option " + arg);
    }
  }
  auto logLevel = parseLogLevel(level);
  if (!logLevel.isOk()) usageError("--log-level: " + logLevel.status().message());
  const auto count = [](const std::string& flag, const std::string& text, int low, int high) {
    char* end = nullptr;
    const long n = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || n < low || n > high)
      usageError(flag + ": expected a whole number from " + std::to_string(low) + " to " +
                 std::to_string(high) + ", got \"" + text + "\"");
    return static_cast<int>(n);
  };
  const int datasetWorkers = count("--dataset-workers", datasetWorkersText, 1, 64);
  const int jobWorkers = count("--job-workers", jobWorkersText, 1, 64);
  const int telemetrySeconds = count("--telemetry-interval", telemetryText, 5, 3600);
  if (tokenFile.empty()) usageError("--cache-node-token-file: required (the cache nodes' token)");
  std::string token;
  {
    std::ifstream in(tokenFile);
    if (!in) usageError("--cache-node-token-file: cannot read " + tokenFile);
    token.assign(std::istreambuf_iterator<char>(in), {});
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
    if (token.empty()) usageError("--cache-node-token-file: " + tokenFile + " is empty");
  }
  configureLogging({.level = *logLevel});
  const Logger log("operator");

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
  kube::ManagerOptions options{.metricsAddress = metricsAddress, .component = "granary-operator"};
  if (leaderElect) {
    options.leaderElection = kube::LeaderElectionOptions{
        .ns = leaseNamespace.empty() ? config->namespace_ : leaseNamespace,
        .name = "granary-operator",
        .identity = kube::candidateIdentity()};
  }
  auto manager = kube::Manager::create(**client, options, registry);
  if (!manager.isOk()) {
    log.error("cannot start", {{"error", manager.status()}});
    return 1;
  }
  auto cacheNodeRequests = op::declareCacheNodeRequests(registry);
  if (!cacheNodeRequests.isOk()) {
    log.error("cannot declare metrics", {{"error", cacheNodeRequests.status()}});
    return 1;
  }
  op::CacheNodeClient cacheNodes(
      {.token = Secret(token), .tlsCaFile = caFile, .requests = *cacheNodeRequests});
  op::DatasetController datasets(
      **manager, cacheNodes, selector,
      {.workers = datasetWorkers, .ns = watchNamespace, .cacheNodeNamespace = cacheNodeNamespace});
  op::TrainingJobController jobs(**manager,
                                 {.workers = jobWorkers,
                                  .ns = watchNamespace,
                                  .cacheNodeNamespace = cacheNodeNamespace,
                                  .cacheNodes = &cacheNodes,
                                  .cacheNodeSelector = selector,
                                  .telemetryInterval = std::chrono::seconds(telemetrySeconds)});
  log.info("started", {{"metrics", metricsAddress},
                       {"cacheNodes", selector},
                       {"namespace", watchNamespace.empty() ? "all" : watchNamespace}});
  const Status result = (*manager)->run(stop.get_token());
  if (!result.isOk()) {
    log.error("stopped", {{"error", result}});
    return 1;
  }
  log.info("stopped");
  return 0;
}
