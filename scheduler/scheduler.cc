#include "scheduler/scheduler.h"

#include <set>

#include "common/cluster/kube_model.h"
#include "common/log.h"
#include "common/names.h"

namespace granary::scheduler {
namespace {

using kube::Json;
namespace resources = kube::resources;

const Logger& logger() {
  static const Logger log("scheduler");
  return log;
}

// Keeps what placement reads of a pod (the pod cache of a large cluster stays small).
Json podView(Json pod) {
  Json kept = Json::object();
  kept["apiVersion"] = Json::string("v1");
  kept["kind"] = Json::string("Pod");
  kept["metadata"] = Json::object();
  for (const char* field : {"name", "namespace", "uid", "resourceVersion", "labels",
                            "creationTimestamp", "deletionTimestamp"}) {
    if (pod["metadata"].has_field(field)) kept["metadata"][field] = pod["metadata"][field];
  }
  kept["spec"] = Json::object();
  for (const char* field :
       {"nodeName", "schedulerName", "nodeSelector", "affinity", "tolerations", "overhead"}) {
    if (pod["spec"].has_field(field)) kept["spec"][field] = pod["spec"][field];
  }
  for (const char* list : {"containers", "initContainers"}) {
    if (!pod["spec"].has_array_field(list)) continue;
    Json containers = Json::array();
    size_t i = 0;
    for (auto& c : pod["spec"][list].as_array()) {
      containers[i] = Json::object();
      if (c.has_field("resources")) containers[i]["resources"] = c["resources"];
      ++i;
    }
    kept["spec"][list] = containers;
  }
  kept["status"] = Json::object();
  if (pod.has_object_field("status")) {
    for (const char* field : {"phase", "conditions"}) {
      if (pod["status"].has_field(field)) kept["status"][field] = pod["status"][field];
    }
  }
  return kept;
}

double secondsSince(const std::string& timestamp, Clock::WallTime now) {
  const auto created = kube::parseMetav1Time(timestamp);
  if (!created) return 0;
  return std::max(0.0, std::chrono::duration<double>(now - *created).count());
}

}  // namespace

std::string gangKeyOf(const Json& pod) {
  const auto labels = kube::stringMap(pod);
  const auto job = labels.find(names::kJobNameLabel);
  if (job == labels.end()) return "pod:" + kube::objectKey(pod);
  const std::string key = kube::objectKey(kube::namespaceOf(pod), job->second);
  return labels.contains(names::kSurplusLabel) ? key + "#" + kube::nameOf(pod) : key;
}

// The job of a gang key: "ns/job" for a job's gang and its surplus workers' ("ns/job#pod").
static std::string jobKeyOf(const std::string& gangKey) {
  return gangKey.substr(0, gangKey.find('#'));
}

Result<SchedulerMetrics> SchedulerMetrics::declare(MetricsRegistry& registry) {
  GRANARY_ASSIGN_OR_RETURN(
      auto attempts,
      registry.addCounter(
          {.name = "granary_scheduler_attempts_total",
           .type = MetricType::kCounter,
           .help = "Gang placement attempts by result (scheduled, unschedulable, error).",
           .labels = {"result"}}));
  GRANARY_ASSIGN_OR_RETURN(
      auto seconds, registry.addHistogram({.name = "granary_scheduler_attempt_duration_seconds",
                                           .type = MetricType::kHistogram,
                                           .unit = MetricUnit::kSeconds,
                                           .help = "Time to place (or fail to place) one gang."}));
  GRANARY_ASSIGN_OR_RETURN(
      auto wait, registry.addHistogram({.name = "granary_scheduler_gang_wait_seconds",
                                        .type = MetricType::kHistogram,
                                        .unit = MetricUnit::kSeconds,
                                        .help = "From a gang's first worker created to all bound.",
                                        .buckets = {0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600}}));
  GRANARY_ASSIGN_OR_RETURN(auto bound,
                           registry.addCounter({.name = "granary_scheduler_bound_pods_total",
                                                .type = MetricType::kCounter,
                                                .help = "Pods bound to nodes."}));
  GRANARY_ASSIGN_OR_RETURN(
      auto locality,
      registry.addHistogram(
          {.name = "granary_scheduler_locality_ratio",
           .type = MetricType::kHistogram,
           .unit = MetricUnit::kRatio,
           .help = "Bytes-weighted fraction of a pod's datasets cached on its node at bind time.",
           .buckets = {0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1}}));
  return SchedulerMetrics{attempts, seconds, wait, bound, locality};
}

Scheduler::Scheduler(kube::Manager& manager, SchedulerOptions options, SchedulerMetrics metrics)
    : manager_(manager), options_(std::move(options)), metrics_(std::move(metrics)) {}

Result<std::unique_ptr<Scheduler>> Scheduler::create(kube::Manager& manager,
                                                     SchedulerOptions options,
                                                     MetricsRegistry& registry) {
  GRANARY_ASSIGN_OR_RETURN(SchedulerMetrics metrics, SchedulerMetrics::declare(registry));
  std::unique_ptr<Scheduler> scheduler(
      new Scheduler(manager, std::move(options), std::move(metrics)));
  scheduler->wire();
  return scheduler;
}

void Scheduler::wire() {
  pods_ = &manager_.informer({.type = resources::pods(), .transform = podView});
  pods_->store().addIndex("gang",
                          [](const Json& pod) { return std::vector<std::string>{gangKeyOf(pod)}; });
  nodes_ = &manager_.informer({.type = resources::nodes()});
  datasets_ = &manager_.informer({.type = resources::datasets()});
  jobs_ = &manager_.informer({.type = resources::trainingJobs()});
  controller_ = &manager_.controller(
      {.name = "scheduler", .workers = options_.workers},
      [this](const std::string& key, std::stop_token) { return reconcile(key); });

  const auto onPod = [this](const kube::ObjectPtr& pod, bool deleted) {
    const std::string key = kube::objectKey(*pod);
    const std::string node = cluster::nodeNameOf(*pod);
    if (deleted || cluster::isTerminal(*pod)) {
      state_.observeGone(key);
    } else if (!node.empty()) {
      if (auto info = cluster::podInfoFrom(*pod); info.isOk())
        state_.observeBound(key, node, info->requests);
    }
    if (!deleted && node.empty() && cluster::schedulerNameOf(*pod) == options_.schedulerName &&
        !cluster::isTerminal(*pod)) {
      controller_->enqueue(gangKeyOf(*pod));
    }
  };
  pods_->addHandler(
      {.onAdd = [onPod](const kube::ObjectPtr& p) { onPod(p, false); },
       .onUpdate = [onPod](const kube::ObjectPtr&, const kube::ObjectPtr& p) { onPod(p, false); },
       .onDelete = [onPod](const kube::ObjectPtr& p) { onPod(p, true); }});
  nodes_->addHandler(
      {.onAdd = [this](const kube::ObjectPtr& n) { upsertNode(*n); },
       .onUpdate = [this](const kube::ObjectPtr&, const kube::ObjectPtr& n) { upsertNode(*n); },
       .onDelete = [this](const kube::ObjectPtr& n) { state_.removeNode(kube::nameOf(*n)); }});
  const auto onDataset = [this](const kube::ObjectPtr&) { refreshCachedDatasets(); };
  datasets_->addHandler(
      {.onAdd = onDataset,
       .onUpdate = [onDataset](const kube::ObjectPtr&, const kube::ObjectPtr& d) { onDataset(d); },
       .onDelete = onDataset});
}

void Scheduler::upsertNode(const Json& node) {
  NodeInfo info = cluster::nodeInfoFrom(node);
  {
    MutexLock lock(cachedDatasetsMutex_);
    const auto it = cachedDatasets_.find(info.name);
    if (it != cachedDatasets_.end()) info.cachedDatasets = it->second;
  }
  state_.upsertNode(std::move(info));
}

void Scheduler::refreshCachedDatasets() {
  std::map<std::string, std::vector<std::string>> byNode;
  for (const auto& dataset : datasets_->store().list()) {
    const DatasetCache cache = cluster::datasetCacheFrom(*dataset);
    for (const auto& [node, bytes] : cache.cachedBytesByNode) byNode[node].push_back(cache.name);
  }
  // Dataset statuses change often; only nodes whose datasets changed are rebuilt.
  std::set<std::string> changed;
  {
    MutexLock lock(cachedDatasetsMutex_);
    for (const auto& [node, datasets] : byNode) {
      const auto it = cachedDatasets_.find(node);
      if (it == cachedDatasets_.end() || it->second != datasets) changed.insert(node);
    }
    for (const auto& [node, datasets] : cachedDatasets_) {
      if (!byNode.count(node)) changed.insert(node);
    }
    cachedDatasets_ = std::move(byNode);
  }
  for (const auto& name : changed) {
    if (const kube::ObjectPtr node = nodes_->store().get(name)) upsertNode(*node);
  }
}

void Scheduler::explain(const std::vector<kube::ObjectPtr>& pods, const std::string& reason) {
  for (const auto& pod : pods) {
    const std::string key = kube::objectKey(*pod);
    {
      MutexLock lock(explainedMutex_);
      if (explained_[key] == reason) continue;  // no write when nothing changed
      explained_[key] = reason;
    }
    Json patch = Json::object();
    patch["status"] = Json::object();
    Json condition = Json::object();
    condition["type"] = Json::string("PodScheduled");
    condition["status"] = Json::string("False");
    condition["reason"] = Json::string("Unschedulable");
    condition["message"] = Json::string(reason);
    condition["lastTransitionTime"] = Json::string(kube::metav1Time(manager_.clock().wallNow()));
    Json conditions = Json::array();
    conditions[0] = condition;
    patch["status"]["conditions"] = conditions;
    // Merge patch replaces the conditions list: keep the others the pod has.
    const Json existing = kube::pathValue(*pod, "status.conditions");
    if (existing.is_array()) {
      size_t i = 1;
      for (const auto& c : existing.as_array()) {
        if (c.has_string_field("type") && c.at("type").as_string() != "PodScheduled")
          conditions[i++] = c;
      }
      patch["status"]["conditions"] = conditions;
    }
    const auto [ns, name] = kube::splitKey(key);
    if (auto patched = manager_.client().mergePatch(resources::pods(), ns, name, patch, "status");
        !patched.isOk()) {
      logger().warn("cannot set PodScheduled=False", {{"pod", key}, {"error", patched.status()}});
    }
    manager_.recorder().record(*pod, kube::EventType::kWarning, "FailedScheduling", reason);
  }
}

PodData Scheduler::jobData(const std::string& gangKey) const {
  PodData data;
  if (gangKey.rfind("pod:", 0) == 0) return data;
  const kube::ObjectPtr job = jobs_->store().get(jobKeyOf(gangKey));
  if (!job) return data;
  const Json locality = kube::pathValue(*job, "spec.scheduling.locality");
  if (locality.is_string() && locality.as_string() == "Required")
    data.locality = api::Locality::kRequired;
  const Json datasets = kube::pathValue(*job, "spec.datasets");
  const std::string ns = kube::splitKey(gangKey).first;
  if (datasets.is_array()) {
    for (const auto& d : datasets.as_array()) {
      if (!d.has_string_field("name")) continue;
      if (const kube::ObjectPtr dataset =
              datasets_->store().get(kube::objectKey(ns, d.at("name").as_string()))) {
        data.datasets.push_back(cluster::datasetCacheFrom(*dataset));
      }
    }
  }
  // A restarted gang resumes from its newest checkpoint: the nodes that hold it count as
  // caching its bytes.
  if (auto checkpoints = cluster::checkpointCacheFrom(*job))
    data.datasets.push_back(std::move(*checkpoints));
  return data;
}

PodData Scheduler::podData(const Json& pod) const { return jobData(gangKeyOf(pod)); }

Result<kube::ReconcileResult> Scheduler::reconcile(const std::string& key) {
  Clock& clock = manager_.clock();
  const auto started = clock.monoNow();
  const auto observe = [&](const char* result) {
    metrics_.attempts.with({result}).increment();
    metrics_.attemptSeconds.with({}).observe(
        std::chrono::duration<double>(clock.monoNow() - started).count());
  };

  // The gang's members: pending ones to place, bound or assumed ones already placed.
  std::vector<kube::ObjectPtr> pending;
  int placed = 0;
  std::string earliest;
  for (const auto& pod : pods_->store().byIndex("gang", key)) {
    if (cluster::isTerminal(*pod) || cluster::schedulerNameOf(*pod) != options_.schedulerName)
      continue;
    const std::string podKey = kube::objectKey(*pod);
    if (!cluster::nodeNameOf(*pod).empty() || state_.isAssumed(podKey)) {
      ++placed;
      continue;
    }
    if (pod->at("metadata").has_field("deletionTimestamp")) continue;
    pending.push_back(pod);
    const std::string created = kube::pathValue(*pod, "metadata.creationTimestamp").is_string()
                                    ? pod->at("metadata").at("creationTimestamp").as_string()
                                    : "";
    if (earliest.empty() || created < earliest) earliest = created;
  }
  if (pending.empty()) return kube::ReconcileResult::done();

  Gang gang;
  gang.key = key;
  gang.size = static_cast<int>(pending.size());
  const PodData data = jobData(key);
  gang.locality = data.locality;
  gang.datasets = data.datasets;
  const bool wholeGang = key.rfind("pod:", 0) != 0 && key.find('#') == std::string::npos;
  if (const kube::ObjectPtr job = wholeGang ? jobs_->store().get(key) : nullptr) {
    // An elastic job's ranks left vacant (status.elastic.vacant) are never created again.
    const Json workers = kube::pathValue(*job, "spec.workers");
    const Json vacant = kube::pathValue(*job, "status.elastic.vacant");
    const int left = vacant.is_array() ? static_cast<int>(vacant.size()) : 0;
    if (workers.is_number()) gang.size = std::max(0, workers.as_integer() - left - placed);
  }
  for (const auto& pod : pending) {
    auto info = cluster::podInfoFrom(*pod);
    if (!info.isOk()) {
      explain({pod}, info.status().message());
      observe("error");
      return kube::ReconcileResult::after(options_.retryInterval);
    }
    gang.pods.push_back(std::move(*info));
  }
  std::sort(gang.pods.begin(), gang.pods.end(),
            [](const PodInfo& a, const PodInfo& b) { return a.key < b.key; });

  GangDecision decision;
  state_.readIndexed(
      [&](const IndexedNodes& nodes) { decision = placeGang(gang, nodes, options_.weights); });
  if (!decision.placed) {
    explain(pending, decision.reason);
    observe("unschedulable");
    return kube::ReconcileResult::after(options_.retryInterval);
  }

  std::map<std::string, const PodInfo*> byKey;
  for (const auto& pod : gang.pods) byKey[pod.key] = &pod;
  for (const auto& p : decision.placements)
    state_.assume(p.podKey, p.node, byKey[p.podKey]->requests);
  int failures = 0;
  for (const auto& p : decision.placements) {
    const auto [ns, name] = kube::splitKey(p.podKey);
    const Status bound = manager_.client().bindPod(ns, name, byKey[p.podKey]->uid, p.node);
    if (!bound.isOk()) {
      ++failures;
      state_.forget(p.podKey);
      logger().warn("bind failed; the worker will be placed again",
                    {{"pod", p.podKey}, {"node", p.node}, {"error", bound}});
      continue;
    }
    metrics_.boundPods.with({}).increment();
    metrics_.locality.with({}).observe(p.locality);
    {
      MutexLock lock(explainedMutex_);
      explained_.erase(p.podKey);
    }
    if (const kube::ObjectPtr pod = pods_->store().get(p.podKey)) {
      manager_.recorder().record(*pod, kube::EventType::kNormal, "Scheduled",
                                 "Successfully assigned " + p.podKey + " to " + p.node);
    }
  }
  if (failures) {
    observe("error");
    // Bindings that failed were released: the gang is placed again with backoff.
    return unavailable(std::to_string(failures) + " of " +
                       std::to_string(decision.placements.size()) +
                       " bindings failed; placing those workers again");
  }
  observe("scheduled");
  if (gang.size > 0 && !earliest.empty()) {
    metrics_.gangWaitSeconds.with({}).observe(secondsSince(earliest, clock.wallNow()));
  }
  return kube::ReconcileResult::done();
}

}  // namespace granary::scheduler
