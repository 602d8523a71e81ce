// granary-operator at scale: N Datasets and N TrainingJobs (one worker each) on the API-server
// double, with 4 cache nodes whose API is answered in process by a service that says Ready at
// once (the operator is measured here, not the caches). The bench plays the kubelet: it
// places each worker and marks it Running. Printed side by side:
//   1. convergence: every Dataset Ready and every job Running with its data figures — time,
//      reconciles/s and API writes;
//   2. a restart on the converged state (every object reconciled again): reconciles/s and API
//      writes (target 0), next to the same runtime with a reconciler that only reads the
//      object from its cache (the floor any controller pays);
//   3. steady state for 60 s at the default poll intervals: reconciles and API writes per
//      reconcile (target 0);
//   4. a 410 Gone in the middle of the watches (the double forgets its history and drops every
//      watch): the informers relist, and the reconciles and API writes of the 60 s from then are
//      printed next to those of the 60 s before (the relist should add neither).
// Memory: the process's resident memory, and the heap the restarted operator holds once it has
// reconciled every object (heap in use after, minus before: its informer caches and state; the
// API-server double shares the process but does not grow while nothing is written).
// Usage: operator_bench [objects] [--nodes N] (defaults 1000 and 4).
#include <grpcpp/grpcpp.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "bench/resident_memory.h"
#include "common/flags.h"
#include "common/kube/manager.h"
#include "common/log.h"
#include "common/names.h"
#include "operator/core/workers.h"
#include "operator/dataset_controller.h"
#include "operator/object_views.h"
#include "operator/training_job_controller.h"
#include "tests/support/api_server_double.h"

namespace granary {
namespace {

using kube::Json;
using Steady = std::chrono::steady_clock;
namespace resources = kube::resources;

constexpr const char* kSelector = names::kCacheNodeSelector;

// Cache nodes that hold every dataset they are asked to hold, fully cached, at once: one service
// answers for every node (each node's agent pod has its own loopback address).
class InstantCacheNode final : public v1::CacheNode::Service {
 public:
  grpc::Status EnsureDataset(grpc::ServerContext*, const v1::EnsureDatasetRequest* request,
                             v1::EnsureDatasetResponse* response) override {
    std::lock_guard lock(mutex_);
    held_.insert(key(request->dataset()));
    *response->mutable_status() = ready(request->dataset());
    return grpc::Status::OK;
  }
  grpc::Status GetDatasetStatus(grpc::ServerContext*, const v1::GetDatasetStatusRequest* request,
                                v1::DatasetStatus* response) override {
    std::lock_guard lock(mutex_);
    if (!held_.count(key(request->dataset())))
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "not held");
    *response = ready(request->dataset());
    return grpc::Status::OK;
  }
  grpc::Status ListDatasets(grpc::ServerContext*, const v1::ListDatasetsRequest*,
                            v1::ListDatasetsResponse*) override {
    return grpc::Status::OK;  // one generation each: nothing older to purge
  }
  grpc::Status SetWarmPlan(grpc::ServerContext*, const v1::SetWarmPlanRequest*,
                           v1::SetWarmPlanResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status GetTelemetry(grpc::ServerContext*, const v1::GetTelemetryRequest*,
                            v1::GetTelemetryResponse*) override {
    return grpc::Status::OK;
  }

 private:
  static std::string key(const v1::DatasetRef& ref) {
    return ref.namespace_() + "/" + ref.name() + "/" + std::to_string(ref.generation());
  }
  v1::DatasetStatus ready(const v1::DatasetRef& ref) const {
    v1::DatasetStatus status;
    *status.mutable_dataset() = ref;
    status.set_phase(v1::DATASET_PHASE_READY);
    auto& p = *status.mutable_progress();
    p.set_total_files(100);
    p.set_total_bytes(100 << 20);
    p.set_owned_files(100);
    p.set_owned_bytes(100 << 20);
    p.set_cached_files(100);
    p.set_cached_bytes(100 << 20);
    p.set_eta_seconds(0);
    return status;
  }

  std::mutex mutex_;
  std::set<std::string> held_;
};

Json parse(const std::string& text) { return Json::parse(text); }

void check(const Status& status, const char* what) {
  if (status.isOk()) return;
  std::fprintf(stderr, "operator_bench: %s: %s\n", what, status.toString().c_str());
  std::exit(1);
}

// Sum of the series of counter `name` in `registry` whose labels hold `label`.
int64_t counterSum(const MetricsRegistry& registry, const std::string& name,
                   const std::string& label = "") {
  std::istringstream lines(registry.exposition());
  double total = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with(name + "{") && line.find(label) != std::string::npos)
      total += std::stod(line.substr(line.rfind(' ') + 1));
  return static_cast<int64_t>(total);
}

// Sum of granary_controller_reconciles_total for `controller` in `registry`.
int64_t reconciles(const MetricsRegistry& registry, const std::string& controller) {
  return counterSum(registry, "granary_controller_reconciles_total",
                    "controller=\"" + controller + "\"");
}
int64_t allReconciles(const MetricsRegistry& registry) {
  return reconciles(registry, "dataset") + reconciles(registry, "trainingjob");
}

int64_t heapInUse() { return static_cast<int64_t>(::mallinfo2().uordblks); }

struct Counts {
  std::atomic<int64_t> writes{0}, reads{0};
  void onResponse(const std::string& method, int) {
    (method == "GET" ? reads : writes).fetch_add(1);
  }
};

// The operator: both controllers, as granary-operator runs them, counting its API requests.
struct Operator {
  MetricsRegistry registry;
  std::unique_ptr<kube::Client> client;
  std::unique_ptr<op::CacheNodeClient> cacheNodes;
  std::unique_ptr<kube::Manager> manager;
  std::unique_ptr<op::DatasetController> datasets;
  std::unique_ptr<op::TrainingJobController> jobs;
  std::stop_source stop;
  std::thread thread;

  Operator(const kube::RestConfig& config, Counts& counts) {
    auto c = kube::Client::create(
        config, {.onResponse = [&counts](const std::string& m, const std::string&, int code) {
          counts.onResponse(m, code);
        }});
    check(c.status(), "client");
    client = std::move(*c);
    cacheNodes = std::make_unique<op::CacheNodeClient>(
        op::CacheNodeClientOptions{.token = Secret(std::string("bench"))});
    auto m = kube::Manager::create(*client, {.metricsAddress = ""}, registry);
    check(m.status(), "manager");
    manager = std::move(*m);
    datasets = std::make_unique<op::DatasetController>(*manager, *cacheNodes, kSelector);
    jobs = std::make_unique<op::TrainingJobController>(
        *manager, op::TrainingJobControllerOptions{.cacheNodes = cacheNodes.get()});
    thread = std::thread([this] { (void)manager->run(stop.get_token()); });
  }
  ~Operator() {
    stop.request_stop();
    thread.join();
  }
};

// The floor: the same runtime (informers, queues, workers) whose reconcilers only read the
// object from the informer cache.
struct Floor {
  MetricsRegistry registry;
  std::unique_ptr<kube::Manager> manager;
  std::stop_source stop;
  std::thread thread;

  explicit Floor(kube::Client& client) {
    auto m = kube::Manager::create(client, {.metricsAddress = ""}, registry);
    check(m.status(), "manager");
    manager = std::move(*m);
    for (const auto& [type, name] : {std::pair{resources::datasets(), "dataset"},
                                     std::pair{resources::trainingJobs(), "trainingjob"}}) {
      kube::Informer& informer = manager->informer({.type = type});
      auto& controller = manager->controller(
          {.name = name, .workers = 4},
          [&informer](const std::string& key, std::stop_token) -> Result<kube::ReconcileResult> {
            (void)informer.store().get(key);
            return kube::ReconcileResult{};
          });
      informer.addHandler(controller.enqueueObjects());
    }
    thread = std::thread([this] { (void)manager->run(stop.get_token()); });
  }
  ~Floor() {
    stop.request_stop();
    thread.join();
  }
};

// The operator's informers alone (no controller), whole objects or its views of them
// (operator/object_views.h): the heap their caches hold once synced, per object cached.
double informerBytesPerObject(kube::Client& client, bool views) {
  const auto view = [views](std::function<Json(Json)> transform) {
    return views ? transform : std::function<Json(Json)>();
  };
  const int64_t before = heapInUse();
  MetricsRegistry registry;
  auto m = kube::Manager::create(client, {.metricsAddress = ""}, registry);
  check(m.status(), "manager");
  std::vector<kube::Informer*> informers{
      &(*m)->informer({.type = resources::datasets(), .transform = view(op::withoutManagedFields)}),
      &(*m)->informer(
          {.type = resources::trainingJobs(), .transform = view(op::withoutManagedFields)}),
      &(*m)->informer({.type = resources::pods(),
                       .labelSelector = names::kJobNameLabel,
                       .transform = view(op::workerPodView)}),
      &(*m)->informer({.type = resources::services(),
                       .labelSelector = names::kJobNameLabel,
                       .transform = view(op::serviceView)}),
      &(*m)->informer({.type = resources::pods(),
                       .labelSelector = kSelector,
                       .transform = view(op::agentPodView)}),
      &(*m)->informer({.type = resources::nodes(), .transform = view(op::nodeView)})};
  std::stop_source stop;
  std::thread thread([&] { (void)(*m)->run(stop.get_token()); });
  size_t objects = 0;
  for (auto* informer : informers) {
    (void)informer->waitForSync(stop.get_token());
    objects += informer->store().keys().size();
  }
  const int64_t held = heapInUse() - before;
  stop.request_stop();
  thread.join();
  return static_cast<double>(held) / static_cast<double>(std::max<size_t>(objects, 1));
}

double secondsSince(Steady::time_point start) {
  return std::chrono::duration<double>(Steady::now() - start).count();
}

// Waits until every Dataset and TrainingJob of "bench" is reconciled `rounds` times in
// `registry`; the seconds it took.
double waitReconciled(const MetricsRegistry& registry, int objects, Steady::time_point start) {
  while (reconciles(registry, "dataset") < objects || reconciles(registry, "trainingjob") < objects)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return secondsSince(start);
}

int run(int objects, int nodes) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  configureLogging({.level = LogLevel::kWarn});
  const std::filesystem::path source = GRANARY_SOURCE_DIR;
  auto server = testing::ApiServerDouble::start({.crdDirectory = source / "crds"});
  check(server.status(), "API server double");
  const kube::RestConfig config = (*server)->restConfig();
  auto made = kube::Client::create(config);
  check(made.status(), "client");
  kube::Client& kubelet = **made;  // the bench's own requests: the kubelet's and the user's
  check(kubelet.create(resources::namespaces(), "", parse(R"({"metadata":{"name":"bench"}})"))
            .status(),
        "namespace");

  // Cache nodes: a Node and an agent pod each, on its own loopback address; one in-process
  // CacheNode service answers for all of them.
  InstantCacheNode service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("0.0.0.0:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  const std::unique_ptr<grpc::Server> cacheNodeServer = builder.BuildAndStart();
  for (int n = 0; n < nodes; ++n) {
    const std::string name = "gpu-" + std::to_string(n);
    const std::string address =
        "127.0." + std::to_string(n / 250) + "." + std::to_string(n % 250 + 1);
    check(kubelet
              .create(resources::nodes(), "",
                      parse(R"({"metadata":{"name":")" + name + R"(","labels":{"pool":")" + name +
                            R"("}}})"))
              .status(),
          "node");
    check(kubelet
              .mergePatch(resources::nodes(), "", name,
                          parse(R"({"status":{"conditions":[{"type":"Ready","status":"True"}]}})"),
                          "status")
              .status(),
          "node status");
    // The node lifecycle controller's part: a Ready node loses the not-ready taint it was
    // created with.
    check(kubelet.mergePatch(resources::nodes(), "", name, parse(R"({"spec":{"taints":null}})"))
              .status(),
          "node taints");
    check(kubelet
              .create(resources::pods(), "bench",
                      parse(R"({"metadata":{"name":"agent-)" + name +
                            R"(","labels":{"app.kubernetes.io/name":"granary-cache-node"}},)"
                            R"("spec":{"nodeName":")" +
                            name +
                            R"(","containers":[{"name":"agent","image":"granary","ports":)"
                            R"([{"name":"grpc","containerPort":)" +
                            std::to_string(port) + "}]}]}}"))
              .status(),
          "agent pod");
    check(kubelet
              .mergePatch(resources::pods(), "bench", "agent-" + name,
                          parse(R"({"status":{"podIP":")" + address +
                                R"(","conditions":[{"type":"Ready","status":"True"}]}})"),
                          "status")
              .status(),
          "agent status");
  }

  std::printf(
      "granary-operator, %d Datasets and %d TrainingJobs (1 worker each), %d cache "
      "nodes\n\n",
      objects, objects, nodes);
  Counts counts;
  const auto converge = Steady::now();
  auto first = std::make_unique<Operator>(config, counts);
  for (int i = 0; i < objects; ++i) {
    const std::string n = std::to_string(i);
    check(kubelet
              .create(resources::datasets(), "bench",
                      parse(R"({"apiVersion":"granary.io/v1alpha1","kind":"Dataset",)"
                            R"("metadata":{"name":"data-)" +
                            n + R"("},"spec":{"source":{"uri":"s3://bench/)" + n +
                            R"(/"},"cache":{"nodeSelector":{"pool":"gpu-)" +
                            std::to_string(i % nodes) + R"("}}}})"))
              .status(),
          "dataset");
    check(kubelet
              .create(resources::trainingJobs(), "bench",
                      parse(R"({"apiVersion":"granary.io/v1alpha1","kind":"TrainingJob",)"
                            R"("metadata":{"name":"job-)" +
                            n + R"("},"spec":{"datasets":[{"name":"data-)" + n +
                            R"(","mountPath":"/data"}],"template":{"spec":{"containers":)"
                            R"([{"name":"trainer","image":"pytorch"}]}}}})"))
              .status(),
          "job");
  }
  const double createdSeconds = secondsSince(converge);
  // The scheduler and the kubelet: bind every worker to its dataset's node and run it; until
  // all converged.
  std::set<std::string> placed;
  for (;;) {
    auto pods =
        kubelet.listAll(resources::pods(), "bench", {.labelSelector = names::kJobNameLabel});
    check(pods.status(), "list pods");
    for (const auto& pod : pods->items) {
      const std::string name = kube::nameOf(pod);
      if (placed.count(name)) continue;
      const int i = std::atoi(name.c_str() + 4);  // job-<i>-worker-0
      check(kubelet.bindPod("bench", name, kube::uidOf(pod), "gpu-" + std::to_string(i % nodes)),
            "bind");
      check(kubelet
                .mergePatch(resources::pods(), "bench", name,
                            parse(R"({"status":{"phase":"Running","conditions":)"
                                  R"([{"type":"Ready","status":"True"}]}})"),
                            "status")
                .status(),
            "run");
      placed.insert(name);
    }
    int ready = 0, running = 0;
    auto datasets = kubelet.listAll(resources::datasets(), "bench");
    auto jobs = kubelet.listAll(resources::trainingJobs(), "bench");
    check(datasets.status(), "list datasets");
    check(jobs.status(), "list jobs");
    for (const auto& d : datasets->items)
      ready += kube::pathValue(d, "status.phase") == Json::string("Ready");
    for (const auto& j : jobs->items)
      running += kube::pathValue(j, "status.phase") == Json::string("Running") &&
                 kube::pathValue(j, "status.data").is_object();
    if (ready == objects && running == objects) break;
    static int reported = 0;
    if (secondsSince(converge) > 10 * (reported + 1)) {
      ++reported;
      std::fprintf(stderr, "   ... %d Datasets Ready, %d jobs Running with data figures\n", ready,
                   running);
    }
    if (secondsSince(converge) > 600) {
      std::fprintf(stderr, "operator_bench: no convergence in 10 min: %d Ready, %d Running\n",
                   ready, running);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const double convergeSeconds = secondsSince(converge);
  const int64_t convergeReconciles =
      reconciles(first->registry, "dataset") + reconciles(first->registry, "trainingjob");
  std::printf(
      "1. convergence (Datasets Ready, jobs Running with data figures; all created in the first "
      "%.1f s)\n"
      "   %.1f s, %lld reconciles (%.0f/s), %lld API writes (%.1f per Dataset or job), %lld API "
      "reads;\n"
      "   %lld retried (a conflict or an error)\n\n",
      createdSeconds, convergeSeconds, static_cast<long long>(convergeReconciles),
      static_cast<double>(convergeReconciles) / convergeSeconds,
      static_cast<long long>(counts.writes.load()),
      static_cast<double>(counts.writes.load()) / (2.0 * objects),
      static_cast<long long>(counts.reads.load()),
      static_cast<long long>(counterSum(first->registry, "granary_workqueue_retries_total")));
  first.reset();

  // 2. A restart on the converged state, next to the floor.
  counts.writes = 0;
  counts.reads = 0;
  double floorSeconds;
  {
    const auto start = Steady::now();
    Floor floor(kubelet);
    floorSeconds = waitReconciled(floor.registry, objects, start);
  }
  const int64_t heapBefore = heapInUse();
  const auto restart = Steady::now();
  Operator second(config, counts);
  const double restartSeconds = waitReconciled(second.registry, objects, restart);
  const int64_t restartWrites = counts.writes.load();
  const int64_t operatorHeap = heapInUse() - heapBefore;
  std::printf(
      "2. restart on the converged state: every object reconciled once\n"
      "   granary-operator  %6.2f s  %7.0f reconciles/s  %lld API writes (target 0)\n"
      "   floor (read only) %6.2f s  %7.0f reconciles/s\n"
      "   ratio %.2f of the floor's rate\n\n",
      restartSeconds, 2 * objects / restartSeconds, static_cast<long long>(restartWrites),
      floorSeconds, 2 * objects / floorSeconds, floorSeconds / restartSeconds);
  const double wholeBytes = informerBytesPerObject(kubelet, false);
  const double viewBytes = informerBytesPerObject(kubelet, true);
  const bench::ResidentMemory resident = bench::residentMemory();
  const int cached = 3 * objects + 2 * nodes;  // Datasets, jobs, workers; Nodes, agent pods
  std::printf(
      "   memory: the restarted operator's heap %.0f MiB (%.1f KB per cached object, %d objects);\n"
      "   its informers' caches alone %.1f KB per object, next to %.1f KB keeping whole objects;\n"
      "   the bench process (the API-server double and the operator) resident %.0f MiB, peak %.0f "
      "MiB\n\n",
      static_cast<double>(operatorHeap) / (1 << 20),
      static_cast<double>(operatorHeap) / cached / 1000, cached, viewBytes / 1000,
      wholeBytes / 1000, static_cast<double>(resident.current) / (1 << 20),
      static_cast<double>(resident.peak) / (1 << 20));

  // 3. Steady state at the default poll intervals.
  const int64_t before = allReconciles(second.registry);
  const int64_t writesBefore = counts.writes.load();
  std::this_thread::sleep_for(std::chrono::seconds(60));
  const int64_t steady = allReconciles(second.registry) - before;
  const int64_t steadyWrites = counts.writes.load() - writesBefore;
  std::printf(
      "3. steady state, 60 s (Datasets polled every 30 s, jobs' telemetry every 20 s)\n"
      "   %lld reconciles (%.1f/s), %lld API writes: %.4f writes per reconcile "
      "(target 0)\n",
      static_cast<long long>(steady), static_cast<double>(steady) / 60,
      static_cast<long long>(steadyWrites),
      steady ? static_cast<double>(steadyWrites) / static_cast<double>(steady) : 0.0);

  // 4. A 410 Gone in the middle of the watches: 60 s before it, then 60 s from it (the poll
  // intervals, 20 s and 30 s, both fit a whole number of times). The watches are refused and
  // dropped, the history moves on (Secrets elsewhere) and is forgotten, so each informer's
  // resumed watch gets 410 Gone and relists.
  const auto window = [&] {
    const int64_t r = allReconciles(second.registry), w = counts.writes.load();
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return std::pair{allReconciles(second.registry) - r, counts.writes.load() - w};
  };
  const auto [quietReconciles, quietWrites] = window();
  const int64_t relistsBefore = counterSum(second.registry, "granary_informer_relists_total");
  (*server)->refuseWatches(true);
  (*server)->dropWatches();
  check(kubelet.create(resources::namespaces(), "", parse(R"({"metadata":{"name":"elsewhere"}})"))
            .status(),
        "namespace");
  for (int i = 0; i < 10; ++i)
    check(kubelet
              .create(resources::secrets(), "elsewhere",
                      parse(R"({"metadata":{"name":"c)" + std::to_string(i) + R"("}})"))
              .status(),
          "secret");
  (*server)->compact();
  (*server)->refuseWatches(false);
  const auto [relistReconciles, relistWrites] = window();
  const int64_t relists =
      counterSum(second.registry, "granary_informer_relists_total") - relistsBefore;
  std::printf(
      "\n4. a 410 Gone in the middle of the watches (history forgotten, every watch dropped)\n"
      "   %lld relists; in the 60 s from then %lld reconciles and %lld API writes,\n"
      "   in the 60 s before %lld reconciles and %lld API writes\n",
      static_cast<long long>(relists), static_cast<long long>(relistReconciles),
      static_cast<long long>(relistWrites), static_cast<long long>(quietReconciles),
      static_cast<long long>(quietWrites));
  cacheNodeServer->Shutdown();
  return 0;
}

}  // namespace
}  // namespace granary

int main(int argc, char** argv) {
  int objects = 1000;
  CLI::App app(
      "granary-operator converging, restarting and idling over N Datasets and N "
      "TrainingJobs on the API-server double.",
      "operator_bench");
  app.add_option("objects", objects, "Datasets, and as many TrainingJobs")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000));
  int nodes = 4;
  app.add_option("--nodes", nodes, "cache nodes (Datasets are spread over them)")
      ->capture_default_str()
      ->check(CLI::Range(1, 60'000));
  if (auto code = granary::parseCommandLine(app, argc, argv)) return *code;
  return granary::run(objects, nodes);
}
