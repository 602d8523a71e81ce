// granary-cache-node: the node-local dataset cache (a DaemonSet on every GPU node), or, with
// --dataset, a standalone cache that warms Datasets from a manifest without Kubernetes.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "cache-node/checkpoint_metrics.h"
#include "cache-node/csi/csi_server.h"
#include "cache-node/csi/mount_propagation.h"
#include "cache-node/csi/mount_table.h"
#include "cache-node/grpc_service.h"
#include "cache-node/handover.h"
#include "cache-node/options.h"
#include "cache-node/transfer/checkpoint_files.h"
#include "cache-node/transfer/engine_chunks.h"
#include "cache-node/transfer/transfer_peers.h"
#include "cache-node/transfer/transfer_server.h"
#include "common/files.h"
#include "common/flags.h"
#include "common/log.h"
#include "common/metrics_server.h"
#include "common/names.h"
#include "common/termination.h"
#include "engine/cache_metrics.h"
#include "engine/gpu/gpu_sampler.h"
#include "engine/mount/mount_keeper.h"
#include "engine/mount/passthrough.h"
#include "engine/standalone.h"
#include "engine/store/chunk_store.h"

namespace {

// The command line. Every flag but --config, --dataset, --exit-when-warm and
// --serve-mount-keeper sets an option over what the options file says.
struct NodeFlags {
  std::string configFile, datasetFile, serveKeeper;
  bool exitWhenWarm = false;
  std::vector<std::function<void(granary::cache::NodeOptions&)>> overrides;  // in flag order
};

void addNodeFlags(CLI::App& app, NodeFlags& flags) {
  using granary::cache::NodeOptions;
  using granary::names::kCacheNodeGrpcPort, granary::names::kCacheNodeMetricsPort;
  const auto option = [&](const std::string& flag, std::string NodeOptions::*field,
                          const std::string& help) {
    return app.add_option_function<std::string>(
        flag,
        [&flags, field](const std::string& value) {
          flags.overrides.push_back(
              [field, value](NodeOptions& options) { options.*field = value; });
        },
        help);
  };
  app.add_option("--config", flags.configFile,
                 "options file (YAML); without it every option has its default")
      ->check(CLI::ExistingFile);
  option("--node-name", &NodeOptions::nodeName,
         "this node's name (default: $NODE_NAME, else the host name)");
  option("--token-file", &NodeOptions::tokenFile,
         "the node's shared token, for the API, the mount keeper and the hand-over (default: "
         "<state-dir>/token, created if missing)");
  option("--state-dir", &NodeOptions::stateDirectory,
         "manifests, chunk index and default cache directory (default: /var/lib/granary)");
  option("--listen", &NodeOptions::listen,
         "gRPC address of the CacheNode and Peer APIs (default: 0.0.0.0:" +
             std::to_string(kCacheNodeGrpcPort) + ")");
  option("--transfer-listen", &NodeOptions::transferListen,
         "the peer data plane's TCP address; \"\" sends chunks over the Peer API instead "
         "(default: 0.0.0.0:" +
             std::to_string(granary::names::kCacheNodeTransferPort) + ")");
  option("--metrics-address", &NodeOptions::metricsAddress,
         "/metrics, /healthz, /readyz; \"\" disables (default: 0.0.0.0:" +
             std::to_string(kCacheNodeMetricsPort) + ")");
  option("--csi-socket", &NodeOptions::csiSocket,
         "serve the CSI node plugin (csi.granary.io) on this unix socket");
  option("--mount-keeper-socket", &NodeOptions::mountKeeperSocket,
         "the mount keeper's unix socket (default: <state-dir>/mount-keeper.sock). Mount recovery "
         "is on by default: dataset mounts are handed to the keeper there (granary-cache-node "
         "--serve-mount-keeper SOCKET), so that they and their readers outlive a restart of this "
         "process. It needs /dev/fuse with CAP_SYS_ADMIN, FUSE descriptors passed over a unix "
         "socket and a kernel that resends the FUSE requests a stopped process had read "
         "(FUSE_NOTIFY_RESEND, Linux 6.9+); the node checks at start, says in one log line "
         "whether mounts can outlive a restart, and where they cannot runs without the keeper "
         "and says why");
  app.add_flag_function(
      "--no-mount-keeper",
      [&flags](int64_t) {
        flags.overrides.push_back([](NodeOptions& options) { options.mountKeeper = false; });
      },
      "turn mount recovery off (mountKeeper: false): dataset mounts end with this process");
  option("--log-level", &NodeOptions::logLevel, "debug, info, warn or error (default: info)")
      ->check(granary::checkLogLevel);
  app.add_option_function<int32_t>(
         "--gpu-sample-interval",
         [&flags](int32_t ms) {
           flags.overrides.push_back(
               [ms](NodeOptions& options) { options.gpuSampleIntervalMs = ms; });
         },
         "milliseconds between two samples of the GPUs through NVML (default: 1000)")
      ->check(CLI::Range(100, 60'000));
  option("--nvml-library", &NodeOptions::nvmlLibrary,
         "NVML's library, a file name or a path (default: libnvidia-ml.so.1)");
  option("--pod-resources-socket", &NodeOptions::podResourcesSocket,
         "the kubelet's PodResources API (e.g. /var/lib/kubelet/pod-resources/kubelet.sock), to "
         "attribute GPUs to pods");
  app.add_option("--dataset", flags.datasetFile,
                 "standalone: cache the Datasets of a manifest file on this node")
      ->check(CLI::ExistingFile);
  app.add_flag("--exit-when-warm", flags.exitWhenWarm,
               "with --dataset: exit once every dataset settled (0 when all Ready)")
      ->needs("--dataset");
  app.add_option("--serve-mount-keeper", flags.serveKeeper,
                 "be the mount keeper on this unix socket (a process of its own, e.g. a second "
                 "container of the pod): hold the mounts' FUSE connections across restarts");
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
  return granary::readSecretFile(path);
}

// The mount keeper's whole life: hold what it is given until SIGTERM.
int serveMountKeeper(const std::string& socket, const granary::Secret& token,
                     const std::string& level, const std::stop_source& stop) {
  granary::configureLoggingAt(level);
  const granary::Logger log("mount-keeper");
  auto keeper = granary::cache::MountKeeper::listen(socket, token);
  if (!keeper.isOk()) {
    log.error("cannot start", {{"error", keeper.status()}});
    return 1;
  }
  log.info("started", {{"socket", socket}});
  (*keeper)->serve(stop.get_token());
  log.info("stopped: the mounts it kept end");
  return 0;
}

// The node from the process it replaces, where one listens at `socket`: the requests it served,
// to ensure again. Said in the log either way but a first start.
std::vector<std::string> takeOverFromPredecessor(const std::filesystem::path& socket,
                                                 const granary::Secret& token) {
  const granary::Logger log("handover");
  auto taken = granary::cache::takeOverNode(socket, token);
  if (!taken.isOk()) {
    log.warn(
        "the cache node this one replaces did not hand the node over: starting as after a "
        "stop; mounts that no keeper holds any more are mounted again, and the pods that "
        "read them need a restart",
        {{"error", taken.status()}});
    return {};
  }
  if (!taken->has_value()) return {};
  log.info("the cache node this one replaces released the node", {{"datasets", (*taken)->size()}});
  return std::move(**taken);
}

// Waits while another process holds the state without handing it over (an older cache node, of
// a version before the hand-over): ready meanwhile, so that a surge rollout goes on and ends it.
// False when stopped meanwhile.
bool awaitOlderNode(const std::filesystem::path& state, granary::MetricsServer* metrics,
                    std::stop_token stop) {
  using granary::Status;
  if (!granary::cache::stateHeldElsewhere(state)) return true;
  const granary::Logger log("handover");
  log.warn(
      "an older cache node that cannot hand over holds the state directory: waiting for it "
      "to end, ready meanwhile so that the rollout ends it; the mounts it serves end with it, "
      "and the pods that read them need a restart",
      {{"state", state.string()}});
  if (metrics) metrics->addCheck("/readyz", [] { return Status::ok(); });
  while (granary::cache::stateHeldElsewhere(state)) {
    if (!granary::realClock().sleepFor(std::chrono::milliseconds(500), stop)) return false;
  }
  if (metrics)
    metrics->addCheck("/readyz", [] { return granary::unavailable("opening the state"); });
  log.info("the older cache node ended: opening the state");
  return true;
}

// Each cache directory's use against its quota, as gauges: from the start, so that an idle node
// draws as idle rather than as missing.
void exportDiskUsage(const granary::cache::CacheMetrics& metrics,
                     const granary::cache::CacheEngine& engine) {
  for (const auto& disk : engine.usage()) {
    metrics.diskUsedBytes.with({disk.path.string()}).set(static_cast<double>(disk.usedBytes));
    metrics.diskQuotaBytes.with({disk.path.string()}).set(static_cast<double>(disk.quotaBytes));
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace granary;
  using namespace granary::cache;
  std::stop_source stop = stopOnTerminationSignals();

  CLI::App app("granary-cache-node: the node-local dataset cache", names::kCacheNode);
  NodeFlags flags;
  addNodeFlags(app, flags);
  if (auto exit = parseCommandLine(app, argc, argv)) return *exit;

  NodeOptions options;
  if (!flags.configFile.empty()) {
    auto loaded = config::decodeFile<NodeOptions>(flags.configFile);
    if (!loaded.isOk()) {
      std::fprintf(stderr, "granary-cache-node: %s\n", loaded.status().message().c_str());
      return 2;
    }
    options = std::move(*loaded);
  }
  for (const auto& apply : flags.overrides) apply(options);
  const bool defaultToken = options.tokenFile.empty();
  applyDefaults(options);
  auto token = loadToken(options.tokenFile, defaultToken);
  if (!token.isOk()) {
    std::fprintf(stderr, "granary-cache-node: no token (tokenFile %s): %s\n",
                 options.tokenFile.c_str(), token.status().message().c_str());
    return 1;
  }
  if (!flags.serveKeeper.empty())
    return serveMountKeeper(flags.serveKeeper, *token, options.logLevel, stop);

  if (auto wrong = checkLogLevel(options.logLevel); !wrong.empty()) {
    std::fprintf(stderr, "granary-cache-node: logLevel: %s\n", wrong.c_str());
    return 2;
  }
  configureLoggingAt(options.logLevel);
  const Logger log("cache-node");

  std::vector<api::Dataset> datasets;
  if (!flags.datasetFile.empty()) {
    auto loaded = loadDatasets(flags.datasetFile);
    if (!loaded.isOk()) {
      std::fprintf(stderr, "granary-cache-node: %s\n", loaded.status().message().c_str());
      return 2;
    }
    datasets = std::move(*loaded);
  }
  MetricsRegistry registry;
  if (const Status declared = declareBuildInfo(registry, names::kCacheNode); !declared.isOk()) {
    log.error("cannot declare metrics", {{"error", declared}});
    return 1;
  }
  auto metrics = CacheMetrics::create(registry);
  if (!metrics.isOk()) {
    log.error("cannot declare metrics", {{"error", metrics.status()}});
    return 1;
  }
  ReaderAccounting readers(metrics->get());
  std::unique_ptr<GpuSampler> gpus;  // null with gpuTelemetry off
  if (options.gpuTelemetry) {
    auto started =
        GpuSampler::start({.library = options.nvmlLibrary,
                           .interval = std::chrono::milliseconds(options.gpuSampleIntervalMs),
                           .hostname = options.nodeName,
                           .podResourcesSocket = options.podResourcesSocket,
                           .readerWait = [&readers] { return readers.waitByPod(); }},
                          realClock(), &registry);
    if (!started.isOk()) {
      log.error("cannot sample the GPUs", {{"error", started.status()}});
      return 1;
    }
    gpus = std::move(*started);
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
  // The node from the process it replaces (a new pod's beside the old one's), before the state
  // is opened: that process closes it first.
  const std::filesystem::path stateDirectory = options.stateDirectory;
  const std::filesystem::path handoverSocket = stateDirectory / kHandoverSocketName;
  const std::vector<std::string> handedOver = takeOverFromPredecessor(handoverSocket, *token);
  if (!awaitOlderNode(stateDirectory, metricsServer.get(), stop.get_token())) return 0;
  EnsuredRecord ensured;
  CutOffReaders cutOff(metrics->get());
  GenerationReaders generationReaders;
  GrpcPeers peers({.token = *token, .tlsCaFile = options.tls.caFile});
  auto transferMetrics = transfer::TransferMetrics::create(registry);
  if (!transferMetrics.isOk()) {
    log.error("cannot declare metrics", {{"error", transferMetrics.status()}});
    return 1;
  }
  // The data plane moves chunk bytes in the clear: with TLS on they go over the Peer API.
  const bool dataPlane = !options.transferListen.empty() && !options.tls.enabled();
  std::unique_ptr<transfer::TransferClient> transferClient;
  if (dataPlane) {
    transferClient = std::make_unique<transfer::TransferClient>(
        transfer::TransferClientOptions{
            .token = *token,
            .nodeName = options.nodeName,
            .connectionsPerPeer = options.transferConnectionsPerPeer,
            .stall = std::chrono::milliseconds(options.transferStallMs)},
        transferMetrics->get());
  }
  transfer::TransferPeers peerReader(peers, transferClient.get());
  EngineOptions engineOptions = engineOptionsOf(options);
  for (auto& named : fileSourcesOf(datasets))  // standalone: what the manifest names
    engineOptions.origins.fileOriginRoots.push_back(std::move(named));
  auto engine = CacheEngine::open(engineOptions, realClock(), &peerReader, metrics->get());
  if (!engine.isOk()) {
    log.error("cannot open the cache", {{"error", engine.status()}});
    return 1;
  }
  exportDiskUsage(**metrics, **engine);
  // What the replaced process served, ensured again before the mounts are adopted.
  for (const std::string& bytes : handedOver) {
    granary::v1::EnsureDatasetRequest request;
    if (!request.ParseFromString(bytes)) continue;
    if (auto cache = ensureRequested(**engine, peers, request); cache.isOk()) {
      ensured.ensured(request);
    } else {
      log.warn("a dataset handed over cannot be ensured: it is when the operator asks again",
               {{"dataset", request.dataset().namespace_() + "/" + request.dataset().name()},
                {"error", cache.status()}});
    }
  }
  // The jobs' checkpoint volumes, on the first cache directory's disk; file:// ones write only
  // beneath checkpointOriginRoots.
  OriginSettings checkpointOrigins =
      originSettingsOf(options.checkpointOriginRoots, "checkpointOriginRoots");
  // Each copies its files to the peers the operator sets (SetCheckpointPeers).
  CheckpointPeers checkpointPeers(peers, peerReader, options.nodeName);
  auto checkpoints = std::make_unique<CheckpointVolumes>(
      CheckpointVolumesOptions{
          .root = std::filesystem::path(options.cacheDirectories.front().path) /
                  ChunkStore::kOthersDirectory,
          .origins = std::move(checkpointOrigins),
          .copyTargets = [&checkpointPeers](
                             const std::string& ns,
                             const std::string& uri) { return checkpointPeers.targetsOf(ns, uri); },
          .peerTrees =
              [&checkpointPeers](const std::string& ns, const std::string& uri,
                                 const std::vector<std::pair<std::string, std::string>>& nodes) {
                return checkpointPeers.treesOf(ns, uri, nodes);
              }},
      realClock());
  // The data plane: chunks and checkpoint files for the peers.
  transfer::EngineChunks engineChunks(**engine);
  transfer::VolumeFiles volumeFiles(*checkpoints);
  std::unique_ptr<transfer::TransferServer> transferServer;
  if (dataPlane) {
    auto started = transfer::TransferServer::start(
        {.address = options.transferListen,
         .token = *token,
         .stall = std::chrono::milliseconds(options.transferStallMs),
         .flipByteForTests = std::getenv("GRANARY_TEST_TRANSFER_FLIP_BYTE") != nullptr},
        engineChunks, &volumeFiles, transferMetrics->get());
    if (!started.isOk()) {
      log.error("cannot serve the data plane (transferListen)", {{"error", started.status()}});
      return 1;
    }
    transferServer = std::move(*started);
  } else {
    log.info("no data plane: chunks and checkpoint files go over the Peer API",
             {{"reason", options.transferListen.empty() ? "transferListen: \"\"" : "tls on"}});
  }
  auto checkpointMetrics = CheckpointMetrics::create(registry);
  if (!checkpointMetrics.isOk()) {
    log.error("cannot declare metrics", {{"error", checkpointMetrics.status()}});
    return 1;
  }
  auto server =
      CacheNodeServer::start(**engine, peers,
                             {.address = options.listen,
                              .token = *token,
                              .tlsCertificateFile = options.tls.certificateFile,
                              .tlsKeyFile = options.tls.keyFile,
                              .readers = &readers,
                              .gpus = gpus.get(),
                              .ensured = &ensured,
                              .cutOff = &cutOff,
                              .generationReaders = &generationReaders,
                              .checkpoints = checkpoints.get(),
                              .checkpointPeers = &checkpointPeers,
                              .transferPort = transferServer ? transferServer->port() : 0});
  if (!server.isOk()) {
    log.error("cannot serve the API", {{"error", server.status()}});
    return 1;
  }
  // Mount recovery: on unless turned off, where this kernel can; said once, either way.
  std::string keeperSocket;
  if (!options.mountKeeper) {
    log.info("mount recovery off: dataset mounts end with this process",
             {{"reason", "mountKeeper: false"}});
  } else if (const Status recovery = checkMountRecovery(options.mountRoot); !recovery.isOk()) {
    log.warn("mount recovery off: dataset mounts end with this process",
             {{"reason", recovery.message()}});
  } else {
    keeperSocket = options.mountKeeperSocket;
    log.info("mount recovery on: dataset mounts outlive a restart while the mount keeper runs",
             {{"keeper_socket", keeperSocket}});
  }
  // Passthrough: on unless turned off, where this kernel offers it; said once, either way.
  bool passthrough = false;
  if (!options.passthrough) {
    log.info("passthrough off: every read goes through this node",
             {{"reason", "passthrough: false"}});
  } else if (const Status offered = cache::passthrough::probe(options.mountRoot); !offered.isOk()) {
    log.info("passthrough off: every read goes through this node", {{"reason", offered.message()}});
  } else {
    passthrough = true;
    log.info("passthrough on: the kernel reads files cached whole past this node",
             {{"passthroughMinAverageFileSize", options.passthroughMinAverageFileSize.bytes}});
  }
  // Mounts that cannot reach the host leave pods with empty volumes: not ready, and say why.
  const Status propagation = checkSharedMounts(options.sharedMounts);
  if (!propagation.isOk())
    log.error("dataset volumes would not reach the pods; not ready", {{"error", propagation}});
  auto mounts = std::make_unique<MountTable>(
      **engine,
      MountTableOptions{
          .root = options.mountRoot,
          .keeper = keeperSocket.empty() ? KeeperClient() : KeeperClient(keeperSocket, *token),
          .keeperStartWait = std::chrono::seconds(options.mountKeeperWaitSeconds),
          .mount = {.passthrough = passthrough,
                    .passthroughMinAverageFileBytes = options.passthroughMinAverageFileSize.bytes},
          .cutOff = &cutOff,
          .generationReaders = &generationReaders},
      readers);
  std::unique_ptr<CsiServer> csi;
  if (!options.csiSocket.empty()) {
    auto started = CsiServer::start(options.csiSocket, options.nodeName, *mounts, *checkpoints);
    if (!started.isOk()) {
      log.error("cannot serve CSI", {{"error", started.status()}});
      return 1;
    }
    csi = std::move(*started);
  }
  // A process replacing this one's pod asks for the node here.
  std::stop_source wake;  // a termination signal or a hand-over request
  std::stop_callback onTermination(stop.get_token(), [&wake] { wake.request_stop(); });
  auto handover =
      HandoverListener::listen(handoverSocket, *token, [&wake] { wake.request_stop(); });
  if (!handover.isOk()) log.warn("no hand-over to a replacing pod", {{"error", handover.status()}});
  if (metricsServer) metricsServer->addCheck("/readyz", [propagation] { return propagation; });
  log.info("started",
           {{"node", options.nodeName},
            {"listen", options.listen},
            {"port", static_cast<int64_t>((*server)->port())},
            {"transferPort", static_cast<int64_t>(transferServer ? transferServer->port() : 0)},
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
  while (!wake.stop_requested()) {
    bool settled = true, ready = true;
    std::shared_ptr<DatasetCache> warming;
    for (const auto& cache : (*engine)->datasets()) {
      const DatasetState state = cache->state();
      const bool done = phaseSettled(state.phase);
      settled = settled && done;
      ready = ready && phaseAsConfigured(state.phase);
      if (!done) warming = cache;
      if (standalone.empty()) continue;
      std::string line = progressLine(cache->key(), state);
      if (printed[cache->key().id()] != line) std::fprintf(stderr, "%s\n", line.c_str());
      printed[cache->key().id()] = std::move(line);
    }
    exportDiskUsage(**metrics, **engine);
    readers.sweep();  // readers that ended a minute ago (pods unpublished, processes gone)
    (*checkpointMetrics)->update(checkpoints->states());
    checkpoints->makeRoom();  // a full disk: files at the origin dropped, oldest first
    checkpoints->sweep();     // volumes no pod uses, drained
    if (flags.exitWhenWarm && settled) {
      exitCode = ready ? 0 : 1;
      break;
    }
    if (warming && !standalone.empty()) {
      warming->waitSettled(tick);  // wakes early when it settles
    } else {
      realClock().sleepUntil(realClock().monoNow() + tick, wake.get_token());
    }
  }
  const bool handingOver = handover.isOk() && (*handover)->requested() && !stop.stop_requested();
  log.info(handingOver ? "releasing the node to the cache node replacing this one" : "stopping");
  if (handingOver && metricsServer) {
    metricsServer->addCheck("/readyz", [] {
      return unavailable("this node was handed over to the cache node replacing it");
    });
  }
  // The mounts stay where the keeper holds them; the state is closed (RocksDB's lock, warm
  // writes) before the successor is answered.
  csi.reset();
  server->reset();
  transferServer.reset();               // before what it serves from
  if (handingOver) mounts->handOver();  // no wait to see whether the keeper stops too
  mounts.reset();
  checkpoints.reset();  // drains stop; the next process resumes them from their records
  standalone.clear();
  engine->reset();
  gpus.reset();
  if (!handingOver) {
    log.info("stopped");
    return exitCode;
  }
  (*handover)->release(ensured.serialized());
  log.info("node released: waiting for this pod's end");
  while (realClock().sleepFor(std::chrono::hours(1), stop.get_token())) {
  }
  handover->reset();  // after the successor was answered
  log.info("stopped");
  return 0;
}
