// granary-cache-node: the node-local dataset cache (a DaemonSet on every GPU node), or, with
// --dataset, a standalone cache that warms Datasets from a manifest without Kubernetes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "cache-node/cache_metrics.h"
#include "cache-node/csi/csi_server.h"
#include "cache-node/grpc_service.h"
#include "cache-node/mount/mount_keeper.h"
#include "cache-node/mount/mount_table.h"
#include "cache-node/options.h"
#include "cache-node/standalone.h"
#include "common/log.h"
#include "common/metrics_server.h"
#include "common/termination.h"

namespace {

constexpr const char* kUsage = R"(granary-cache-node: the node-local dataset cache

Usage: granary-cache-node [--config FILE] [--dataset FILE [--exit-when-warm]]
       granary-cache-node --serve-mount-keeper SOCKET

Options:
  --config FILE       options file (YAML); without it every option has its default
  --node-name NAME    this node's name (default: $NODE_NAME, else the host name)
  --state-dir DIR     manifests, chunk index and default cache directory
  --listen ADDR       gRPC address of the CacheNode and Peer APIs (default 0.0.0.0:7400)
  --metrics-address ADDR  /metrics, /healthz, /readyz; "" disables (default 0.0.0.0:9400)
  --dataset FILE      standalone: cache the Datasets of a manifest file on this node
  --exit-when-warm    with --dataset: exit once every dataset settled (0 when all Ready)
  --csi-socket PATH   serve the CSI node plugin (csi.granary.io) on this unix socket
  --mount-keeper-socket PATH  hand dataset mounts to the keeper there, so that they and their
                      readers outlive a restart of this process
  --serve-mount-keeper SOCKET  be the mount keeper (a process of its own, e.g. a second
                      container of the pod): hold the mounts' FUSE connections across restarts
  --log-level LEVEL   debug, info, warn or error (default: info)
)";

[[noreturn]] void usageError(const std::string& message) {
  std::fprintf(stderr, "granary-cache-node: %s\n\n%s", message.c_str(), kUsage);
  std::exit(2);
}

// The token file, created with a random token when it is the default one and missing.
granary::Result<granary::Secret> loadToken(const std::string& path, bool mayCreate) {
  if (mayCreate && !std::filesystem::exists(path)) {
    std::random_device random;
    std::string token;
    for (int i = 0; i < 32; ++i) token += "0123456789abcdef"[random() % 16];
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      const bool written =
          ::write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
      ::close(fd);
      if (!written) return granary::unavailable("cannot write the token file " + path);
    }
  }
  return granary::cache::readTokenFile(path);
}

// The mount keeper's whole life: hold what it is given until SIGTERM.
int serveMountKeeper(const std::string& socket, const std::string& level,
                     const std::stop_source& stop) {
  auto logLevel = granary::parseLogLevel(level.empty() ? "info" : level);
  if (!logLevel.isOk()) usageError("--log-level: " + logLevel.status().message());
  granary::configureLogging({.level = *logLevel});
  const granary::Logger log("mount-keeper");
  auto keeper = granary::cache::MountKeeper::listen(socket);
  if (!keeper.isOk()) {
    log.error("cannot start", {{"error", keeper.status()}});
    return 1;
  }
  log.info("started", {{"socket", socket}});
  (*keeper)->serve(stop.get_token());
  log.info("stopped: the mounts it kept end");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace granary;
  using namespace granary::cache;
  std::stop_source stop = stopOnTerminationSignals();

  std::string configFile, datasetFile, nodeName, stateDir, listen, metricsAddress, level, csiSocket,
      keeperSocket, serveKeeper;
  bool metricsAddressSet = false, exitWhenWarm = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](std::string& into) {
      if (i + 1 >= argc) usageError(arg + " needs a value");
      into = argv[++i];
    };
    if (arg == "--config")
      value(configFile);
    else if (arg == "--dataset")
      value(datasetFile);
    else if (arg == "--node-name")
      value(nodeName);
    else if (arg == "--state-dir")
      value(stateDir);
    else if (arg == "--listen")
      value(listen);
    else if (arg == "--metrics-address")
      value(metricsAddress), metricsAddressSet = true;
    else if (arg == "--log-level")
      value(level);
    else if (arg == "--csi-socket")
      value(csiSocket);
    else if (arg == "--mount-keeper-socket")
      value(keeperSocket);
    else if (arg == "--serve-mount-keeper")
      value(serveKeeper);
    else if (arg == "--exit-when-warm")
      exitWhenWarm = true;
    else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      usageError("unknown option " + arg);
    }
  }
  if (exitWhenWarm && datasetFile.empty()) usageError("--exit-when-warm needs --dataset");
  if (!serveKeeper.empty()) return serveMountKeeper(serveKeeper, level, stop);

  NodeOptions options;
  if (!configFile.empty()) {
    auto loaded = config::decodeFile<NodeOptions>(configFile);
    if (!loaded.isOk()) {
      std::fprintf(stderr, "granary-cache-node: %s\n", loaded.status().message().c_str());
      return 2;
    }
    options = std::move(*loaded);
  }
  if (!nodeName.empty()) options.nodeName = nodeName;
  if (!stateDir.empty()) options.stateDirectory = stateDir;
  if (!listen.empty()) options.listen = listen;
  if (metricsAddressSet) options.metricsAddress = metricsAddress;
  if (!level.empty()) options.logLevel = level;
  if (!csiSocket.empty()) options.csiSocket = csiSocket;
  if (!keeperSocket.empty()) options.mountKeeperSocket = keeperSocket;
  const bool defaultToken = options.tokenFile.empty();
  applyDefaults(options);

  auto logLevel = parseLogLevel(options.logLevel);
  if (!logLevel.isOk()) usageError("logLevel: " + logLevel.status().message());
  configureLogging({.level = *logLevel});
  const Logger log("cache-node");

  std::vector<api::Dataset> datasets;
  if (!datasetFile.empty()) {
    auto loaded = loadDatasets(datasetFile);
    if (!loaded.isOk()) {
      std::fprintf(stderr, "granary-cache-node: %s\n", loaded.status().message().c_str());
      return 2;
    }
    datasets = std::move(*loaded);
  }
  auto token = loadToken(options.tokenFile, defaultToken);
  if (!token.isOk()) {
    log.error("no API token", {{"error", token.status()}, {"token_file", options.tokenFile}});
    return 1;
  }

  MetricsRegistry registry;
  auto metrics = CacheMetrics::create(registry);
  if (!metrics.isOk()) {
    log.error("cannot declare metrics", {{"error", metrics.status()}});
    return 1;
  }
  std::unique_ptr<MetricsServer> metricsServer;
  if (!options.metricsAddress.empty()) {
    auto started = MetricsServer::start(options.metricsAddress, registry);
    if (!started.isOk()) {
      log.error("cannot serve metrics", {{"error", started.status()}});
      return 1;
    }
    metricsServer = std::move(*started);
    metricsServer->addCheck("/healthz", [] { return Status::ok(); });
  }
  GrpcPeers peers({.token = *token, .tlsCaFile = options.tls.caFile});
  auto engine = CacheEngine::open(engineOptionsOf(options), realClock(), &peers, metrics->get());
  if (!engine.isOk()) {
    log.error("cannot open the cache", {{"error", engine.status()}});
    return 1;
  }
  ReaderAccounting readers(metrics->get());
  auto server = CacheNodeServer::start(**engine, peers,
                                       {.address = options.listen,
                                        .token = *token,
                                        .tlsCertificateFile = options.tls.certificateFile,
                                        .tlsKeyFile = options.tls.keyFile,
                                        .readers = &readers});
  if (!server.isOk()) {
    log.error("cannot serve the API", {{"error", server.status()}});
    return 1;
  }
  auto mounts = std::make_unique<MountTable>(
      **engine, MountTableOptions{options.mountRoot, options.mountKeeperSocket}, readers);
  std::unique_ptr<CsiServer> csi;
  if (!options.csiSocket.empty()) {
    auto started = CsiServer::start(options.csiSocket, options.nodeName, *mounts);
    if (!started.isOk()) {
      log.error("cannot serve CSI", {{"error", started.status()}});
      return 1;
    }
    csi = std::move(*started);
  }
  if (metricsServer) metricsServer->addCheck("/readyz", [] { return Status::ok(); });
  log.info("started", {{"node", options.nodeName},
                       {"listen", options.listen},
                       {"port", static_cast<int64_t>((*server)->port())},
                       {"metrics", options.metricsAddress},
                       {"csi", options.csiSocket},
                       {"state", options.stateDirectory}});

  std::vector<std::shared_ptr<DatasetCache>> standalone;
  for (const auto& dataset : datasets) {
    auto cache = (*engine)->ensure(standaloneSpec(dataset));
    if (!cache.isOk()) {
      log.error("cannot cache the dataset",
                {{"dataset", dataset.metadata.name}, {"error", cache.status()}});
      return 1;
    }
    standalone.push_back(std::move(*cache));
  }
  // Standalone: a progress line per dataset whenever it changed; the loop also refreshes the
  // gauges of every dataset.
  int exitCode = 0;
  const auto tick = std::chrono::seconds(2);
  std::map<std::string, std::string> printed;
  while (!stop.stop_requested()) {
    bool settled = true, ready = true;
    std::shared_ptr<DatasetCache> warming;
    for (const auto& cache : (*engine)->datasets()) {
      const DatasetState state = cache->state();
      const bool done = state.phase == Phase::kReady || state.phase == Phase::kDegraded ||
                        state.phase == Phase::kFailed;
      settled = settled && done;
      ready = ready && state.phase == Phase::kReady;
      if (!done) warming = cache;
      if (standalone.empty()) continue;
      std::string line = progressLine(cache->key(), state);
      if (printed[cache->key().id()] != line) std::fprintf(stderr, "%s\n", line.c_str());
      printed[cache->key().id()] = std::move(line);
    }
    if (exitWhenWarm && settled) {
      exitCode = ready ? 0 : 1;
      break;
    }
    if (warming && !standalone.empty()) {
      warming->waitSettled(tick);  // wakes early when it settles
    } else {
      realClock().sleepUntil(realClock().monoNow() + tick, stop.get_token());
    }
  }
  log.info("stopping");
  csi.reset();
  server->reset();
  mounts.reset();
  standalone.clear();
  engine->reset();
  log.info("stopped");
  return exitCode;
}
