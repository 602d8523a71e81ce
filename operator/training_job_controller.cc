#include "operator/training_job_controller.h"

#include <algorithm>
#include <set>

#include "common/api/dataset.h"
#include "common/api/training_job.h"
#include "common/cluster/kube_model.h"
#include "common/kube/yaml_json.h"
#include "common/log.h"
#include "common/names.h"
#include "operator/cache_node_discovery.h"
#include "operator/core/conditions.h"
#include "operator/core/dataset_reference.h"
#include "operator/core/job_checkpoints.h"
#include "operator/core/workers.h"
#include "operator/object_views.h"

namespace granary::op {

using kube::Json;

namespace {

const Logger& log() {
  static const Logger logger("trainingjob-controller");
  return logger;
}

// The spec with its defaults and every rule checked, decoded from the object as the API server
// sent it, with no detour through text. Errors name the field ("spec.workers: ...").
Result<api::TrainingJobSpec> decodeSpec(const Json& job) {
  Json parts = Json::object();
  parts["spec"] = kube::pathValue(job, "spec");
  const config::Node root = kube::toConfig(parts);
  const config::Node* spec = root.find("spec");
  if (spec == nullptr || spec->isNull()) return invalidArgument("spec: required");
  api::TrainingJobSpec out;
  GRANARY_RETURN_IF_ERROR(decodeValue(*spec, out));
  return out;
}

int labelInt(const Json& pod, const char* label) {
  const auto labels = kube::stringMap(pod);
  auto it = labels.find(label);
  return it == labels.end() ? -1 : std::atoi(it->second.c_str());
}

// Since when `node` has not been Ready: its Ready condition's lastTransitionTime while the
// condition is False or Unknown; nullopt while Ready, or with no Node or condition to tell.
std::optional<WallTime> notReadySince(const kube::ObjectPtr& node) {
  const Json conditions = node ? kube::pathValue(*node, "status.conditions") : Json();
  if (!conditions.is_array()) return std::nullopt;
  for (const auto& c : conditions.as_array()) {
    if (!c.has_string_field("type") || c.at("type").as_string() != "Ready") continue;
    if (c.has_string_field("status") && c.at("status").as_string() == "True") return std::nullopt;
    return c.has_string_field("lastTransitionTime")
               ? kube::parseMetav1Time(c.at("lastTransitionTime").as_string())
               : std::nullopt;
  }
  return std::nullopt;
}

// A worker pod as the lifecycle sees it; `nodes` holds the Nodes (for nodeNotReadySince).
WorkerState workerOf(const Json& pod, const kube::Store& nodes) {
  WorkerState w;
  w.name = kube::nameOf(pod);
  w.uid = kube::uidOf(pod);
  w.rank = labelInt(pod, names::kRankLabel);
  w.attempt = labelInt(pod, names::kAttemptLabel);
  w.node = cluster::nodeNameOf(pod);
  if (!w.node.empty()) w.nodeNotReadySince = notReadySince(nodes.get(w.node));
  const Json phase = kube::pathValue(pod, "status.phase");
  const std::string p = phase.is_string() ? phase.as_string() : "Pending";
  w.phase = p == "Running"     ? WorkerState::Phase::kRunning
            : p == "Succeeded" ? WorkerState::Phase::kSucceeded
            : p == "Failed"    ? WorkerState::Phase::kFailed
            : p == "Unknown"   ? WorkerState::Phase::kUnknown
                               : WorkerState::Phase::kPending;
  w.deleting = !kube::pathValue(pod, "metadata.deletionTimestamp").is_null();
  const Json podReason = kube::pathValue(pod, "status.reason");
  w.disrupted = podReason.is_string() && podReason.as_string() == "Evicted";
  const auto annotations = kube::stringMap(pod, "annotations");
  if (const auto lost = annotations.find(names::kMountLostAnnotation); lost != annotations.end())
    w.mountLost = lost->second;
  const Json conditions = kube::pathValue(pod, "status.conditions");
  if (conditions.is_array()) {
    for (const auto& c : conditions.as_array()) {
      if (!c.has_string_field("type")) continue;
      const bool isTrue = c.has_string_field("status") && c.at("status").as_string() == "True";
      if (c.at("type").as_string() == "Ready") w.ready = isTrue;
      if (c.at("type").as_string() == "DisruptionTarget") w.disrupted = w.disrupted || isTrue;
    }
  }
  const Json statuses = kube::pathValue(pod, "status.containerStatuses");
  if (statuses.is_array()) {
    for (const auto& s : statuses.as_array()) {
      const Json code = kube::pathValue(s, "state.terminated.exitCode");
      if (code.is_integer() && code.as_integer() != 0 && w.exitCode == 0)
        w.exitCode = code.as_integer();
      const Json reason = kube::pathValue(s, "state.waiting.reason");
      if (reason.is_string() && w.waitingReason.empty()) w.waitingReason = reason.as_string();
    }
  }
  if (auto created = kube::parseMetav1Time(kube::metadataField(pod, "creationTimestamp")))
    w.created = *created;
  return w;
}

// `object`'s state; `cachedBy` is the Dataset whose cache settings hold for it: its source when
// it refers to another, itself otherwise.
DatasetState datasetOf(const std::string& name, const kube::ObjectPtr& object,
                       const kube::ObjectPtr& cachedBy) {
  DatasetState d{.name = name};
  if (!object) return d;
  d.exists = true;
  const Json phase = kube::pathValue(*object, "status.phase");
  if (phase.is_string()) d.phase = api::datasetPhaseOf(phase.as_string());
  // The raw spec, as the API server validated it (the CRD's enum): an unknown value is the
  // default, OnCreate.
  const Json warm = cachedBy ? kube::pathValue(*cachedBy, "spec.cache.warm") : Json();
  for (const auto policy : {api::WarmPolicy::kOnJob, api::WarmPolicy::kNever})
    if (warm.is_string() && warm.as_string() == api::warmPolicyName(policy)) d.warm = policy;
  const Json total = kube::pathValue(*object, "status.totalBytes");
  d.totalBytes = total.is_integer() ? total.as_number().to_int64() : 0;
  const Json version = cachedBy ? kube::pathValue(*cachedBy, "status.version") : Json();
  d.version = version.is_integer() ? version.as_number().to_int64() : 0;
  const Json nodes = kube::pathValue(*object, "status.nodes");
  if (nodes.is_array())
    for (const auto& n : nodes.as_array())
      if (n.has_string_field("name") && n.has_integer_field("cachedBytes"))
        d.cachedBytesByNode[n.at("name").as_string()] = n.at("cachedBytes").as_number().to_int64();
  return d;
}

// "namespace\turi": the jobs of a namespace that name one checkpoint uri share it.
std::string checkpointsKey(const Json& job) {
  return kube::namespaceOf(job) + "\t" + kube::pathValue(job, "spec.checkpoints.uri").as_string();
}

bool hasCondition(const Json& status, const std::string& type) {
  const Json conditions = kube::pathValue(status, "conditions");
  if (!conditions.is_array()) return false;
  return std::any_of(conditions.as_array().begin(), conditions.as_array().end(),
                     [&](const Json& c) {
                       return c.has_string_field("type") && c.at("type").as_string() == type;
                     });
}

bool finished(const Json& status) {
  const Json phase = kube::pathValue(status, "phase");
  return phase.is_string() && (phase.as_string() == "Succeeded" || phase.as_string() == "Failed");
}

}  // namespace

TrainingJobController::TrainingJobController(kube::Manager& manager,
                                             TrainingJobControllerOptions options, Clock& clock)
    : manager_(manager), options_(std::move(options)), clock_(clock) {
  if (options_.rendezvousKey.empty()) options_.rendezvousKey = api::randomRendezvousToken();
  if (options_.cacheNodes)
    directory_.emplace(manager, options_.cacheNodeNamespace, options_.cacheNodeSelector);
  const std::string& scope = options_.ns;
  jobs_ = &manager.informer(
      {.type = kube::resources::trainingJobs(), .ns = scope, .transform = withoutManagedFields});
  pods_ = &manager.informer({.type = kube::resources::pods(),
                             .ns = scope,
                             .labelSelector = names::kJobNameLabel,
                             .transform = workerPodView});
  services_ = &manager.informer({.type = kube::resources::services(),
                                 .ns = scope,
                                 .labelSelector = names::kJobNameLabel,
                                 .transform = serviceView});
  datasets_ = &manager.informer(
      {.type = kube::resources::datasets(), .ns = scope, .transform = withoutManagedFields});
  nodes_ = &manager.informer({.type = kube::resources::nodes(), .transform = nodeView});
  pods_->store().addIndex("job", kube::indexByLabel(names::kJobNameLabel));
  auto& controller = manager.controller(
      {.name = "trainingjob", .workers = options_.workers},
      [this](const std::string& key, std::stop_token) { return reconcile(key); });
  jobs_->addHandler(controller.enqueueObjects());
  const auto ownerJob = [](const Json& object) {
    const auto labels = kube::stringMap(object);
    auto it = labels.find(names::kJobNameLabel);
    return it == labels.end()
               ? std::vector<std::string>{}
               : std::vector<std::string>{kube::objectKey(kube::namespaceOf(object), it->second)};
  };
  pods_->addHandler(controller.enqueueMapped(ownerJob));
  services_->addHandler(controller.enqueueMapped(ownerJob));
  // A Dataset changing phase may let the jobs that use it start.
  jobs_->store().addIndex("dataset", [](const Json& job) {
    std::vector<std::string> keys;
    const Json datasets = kube::pathValue(job, "spec.datasets");
    if (datasets.is_array())
      for (const auto& d : datasets.as_array())
        if (d.has_string_field("name"))
          keys.push_back(kube::objectKey(kube::namespaceOf(job), d.at("name").as_string()));
    return keys;
  });
  // Jobs of a namespace that name one checkpoint uri: each one's change may change the others'
  // CheckpointUriShared condition.
  jobs_->store().addIndex("checkpoints", [](const Json& job) {
    const Json uri = kube::pathValue(job, "spec.checkpoints.uri");
    return uri.is_string() ? std::vector<std::string>{checkpointsKey(job)}
                           : std::vector<std::string>{};
  });
  jobs_->addHandler(controller.enqueueMapped([this](const Json& job) {
    std::vector<std::string> keys;
    const Json uri = kube::pathValue(job, "spec.checkpoints.uri");
    if (!uri.is_string()) return keys;
    for (const auto& other : jobs_->store().byIndex("checkpoints", checkpointsKey(job)))
      if (kube::uidOf(*other) != kube::uidOf(job)) keys.push_back(kube::objectKey(*other));
    return keys;
  }));
  datasets_->addHandler(controller.enqueueMapped([this](const Json& dataset) {
    std::vector<std::string> keys;
    for (const auto& job : jobs_->store().byIndex("dataset", kube::objectKey(dataset)))
      keys.push_back(kube::objectKey(*job));
    return keys;
  }));
}

Result<kube::ReconcileResult> TrainingJobController::reconcile(const std::string& key) {
  const kube::ObjectPtr object = jobs_->store().get(key);
  if (!object) {
    MutexLock lock(mutex_);
    attempts_.erase(key);
    telemetry_.erase(key);
    if (options_.series) {
      const auto [ns, name] = kube::splitKey(key);
      options_.series->forget(ns, name);
    }
    return kube::ReconcileResult::done();
  }
  const Json& job = *object;
  if (!kube::pathValue(job, "metadata.deletionTimestamp").is_null())
    return kube::ReconcileResult::done();
  const std::string ns = kube::namespaceOf(job), name = kube::nameOf(job);
  const Json previous = job.has_object_field("status") ? job.at("status") : Json();
  JobObservation o{.jobName = name,
                   .generation = kube::generationOf(job),
                   .previousStatus = previous,
                   .now = clock_.wallNow()};
  auto spec = decodeSpec(job);
  if (!spec.isOk()) {
    Json status = previous.is_object() ? previous : Json::object();
    if (kube::pathValue(status, "phase").is_string() && status.at("phase").as_string() == "Failed")
      return kube::ReconcileResult::terminal(spec.status());
    Json conditions = kube::pathValue(status, "conditions");
    setCondition(conditions, {"Failed", true, "InvalidSpec", spec.status().message()}, o.generation,
                 o.now);
    status["conditions"] = conditions;
    status["phase"] = Json::string("Failed");
    Json next = job;
    next["status"] = status;
    GRANARY_RETURN_IF_ERROR(
        manager_.client().updateStatus(kube::resources::trainingJobs(), next).status());
    manager_.recorder().record(job, kube::EventType::kWarning, "InvalidSpec",
                               spec.status().message());
    return kube::ReconcileResult::terminal(spec.status());
  }
  {
    const Json seen = kube::pathValue(previous, "restarts");
    MutexLock lock(mutex_);
    const auto it = attempts_.find(key);
    if (it != attempts_.end() && it->second.uid == kube::uidOf(job) &&
        (seen.is_integer() ? seen.as_number().to_int64() : 0) < it->second.attempt)
      return kube::ReconcileResult::after(std::chrono::milliseconds(100));
  }
  o.spec = std::move(*spec);
  if (auto created = kube::parseMetav1Time(kube::metadataField(job, "creationTimestamp")))
    o.created = *created;
  for (const auto& pod : pods_->store().byIndex("job", name))
    if (kube::namespaceOf(*pod) == ns && kube::stringMap(*pod).contains(names::kRankLabel))
      o.workers.push_back(workerOf(*pod, nodes_->store()));
  for (const auto& d : o.spec.datasets) {
    const kube::ObjectPtr dataset = datasets_->store().get(kube::objectKey(ns, d.name));
    const std::string source = dataset ? sourceKeyOf(*dataset) : "";
    o.datasets.push_back(
        datasetOf(d.name, dataset, source.empty() ? dataset : datasets_->store().get(source)));
  }

  JobPlan plan = planJob(o);
  auto& client = manager_.client();
  if (plan.deleteJob) {
    Status removed =
        client.remove(kube::resources::trainingJobs(), ns, name,
                      {.propagationPolicy = "Background", .preconditionUid = kube::uidOf(job)});
    if (!removed.isOk() && removed.code() != StatusCode::kNotFound) return removed;
    return kube::ReconcileResult::done();
  }
  kube::ReconcileResult result;
  if (plan.requeueAfter) result.requeueAfter = *plan.requeueAfter;
  const bool running = kube::pathValue(plan.status, "phase").is_string() &&
                       plan.status.at("phase").as_string() == "Running";
  // A finished job's checkpoints drain on: the nodes of its workers that remain are asked until
  // they are at the origin.
  const Json pending = kube::pathValue(previous, "checkpoints.pendingFiles");
  const bool draining = o.spec.checkpoints && pending.is_integer() &&
                        pending.as_number().to_int64() > 0 &&
                        std::any_of(o.workers.begin(), o.workers.end(),
                                    [](const WorkerState& w) { return !w.node.empty(); });
  const bool reads = !o.spec.datasets.empty() || o.spec.checkpoints.has_value();
  if (options_.cacheNodes && reads && (running || draining)) {
    const Summaries shown = sampleTelemetry(job, key, o.spec, o.workers);
    if (!shown.data.is_null()) plan.status["data"] = shown.data;
    if (!shown.gpu.is_null()) plan.status["gpu"] = shown.gpu;
    if (!shown.checkpoints.is_null()) {
      plan.status["checkpoints"] = shown.checkpoints;
      noteCheckpointDisk(job, o.generation, plan.status);
    }
    if (result.requeueAfter == Clock::Duration::zero() ||
        result.requeueAfter > options_.telemetryInterval)
      result.requeueAfter = options_.telemetryInterval;
  }
  if (options_.series && options_.cacheNodes && reads && running) {
    options_.series->publish(ns, name, plan.status);
  } else if (options_.series) {
    options_.series->remove(ns, name);
  }
  if (o.spec.checkpoints) noteCheckpointUri(job, o, plan);
  const int attempt =
      static_cast<int>(kube::pathValue(plan.status, "restarts").as_number().to_int64());
  // The status goes first: it records decisions (a gang restart's attempt) that the deletions
  // below would otherwise erase from view if the write failed.
  if (!kube::sameJson(plan.status, previous)) {
    Json next = job;
    next["status"] = plan.status;
    auto written = client.updateStatus(kube::resources::trainingJobs(), next);
    if (!written.isOk()) return written.status();
    if (options_.series && o.spec.elastic)
      options_.series->publishMembership(ns, name, plan.status, plan.membershipChanges,
                                         plan.recoverySeconds);
    MutexLock lock(mutex_);
    attempts_[key] = {kube::uidOf(job), attempt};
  }
  for (const auto& pod : plan.remove) {
    Status removed = client.remove(kube::resources::pods(), ns, pod);
    if (!removed.isOk() && removed.code() != StatusCode::kNotFound) return removed;
  }
  for (const auto& pod : plan.removeNow) {
    Status removed = client.remove(kube::resources::pods(), ns, pod, {.gracePeriodSeconds = 0});
    if (!removed.isOk() && removed.code() != StatusCode::kNotFound) return removed;
    log().info("worker deleted without grace: its node is lost", {{"job", key}, {"pod", pod}});
  }
  if (!plan.goneFromRendezvous.empty()) tellRendezvous(job, attempt, plan.goneFromRendezvous);
  if (!plan.create.empty() && !services_->store().get(kube::objectKey(ns, name))) {
    auto created = client.create(kube::resources::services(), ns, headlessService(job, o.spec));
    if (!created.isOk() && created.status().code() != StatusCode::kAlreadyExists)
      return created.status();
  }
  // A gang starting (no worker of its attempt yet) meets at a store created with it; a replacement
  // joins the store its gang has.
  const bool gangStarts = std::none_of(o.workers.begin(), o.workers.end(),
                                       [&](const WorkerState& w) { return w.attempt == attempt; });
  if (!plan.create.empty() && o.spec.elastic && gangStarts)
    GRANARY_RETURN_IF_ERROR(ensureRendezvous(job));
  std::string checkpointPeers;  // where a new worker's checkpoint restore reads first
  if (o.spec.checkpoints && directory_ && !plan.create.empty()) {
    std::map<std::string, std::string> addresses;
    for (const CacheNode& n : *directory_->nodes())
      if (n.node.ready) addresses[n.node.name] = n.address;
    checkpointPeers =
        checkpointPeersAttribute(kube::pathValue(job, "status.checkpoints"), addresses);
  }
  for (int rank : plan.create) {
    auto created =
        client.create(kube::resources::pods(), ns,
                      workerPod(job, o.spec, rank, attempt,
                                kube::pathValue(plan.status, "datasetVersions"), checkpointPeers));
    if (!created.isOk() && created.status().code() != StatusCode::kAlreadyExists)
      return created.status();
  }
  for (const auto& e : plan.events) {
    manager_.recorder().record(
        job, e.warning ? kube::EventType::kWarning : kube::EventType::kNormal, e.reason, e.message);
    log().info(e.reason, {{"job", key}, {"message", e.message}});
  }
  return result;
}

// The store hears of the workers' agents gone (each agent's address is its pod's hostname, the
// worker's name). A store that does not answer costs the others torch's keep-alive, not the job.
void TrainingJobController::tellRendezvous(const Json& job, int attempt,
                                           const std::vector<std::string>& workers) {
  std::vector<api::GoneAgent> gone;
  for (const std::string& worker : workers) gone.push_back({.host = worker});
  const std::string address = rendezvousName(kube::nameOf(job)) + "." + kube::namespaceOf(job) +
                              ".svc:" + std::to_string(api::kRendezvousNoticePort);
  const Status told = options_.tellRendezvous(
      address, api::rendezvousNotice(elasticRendezvous(job, attempt).id, gone),
      api::rendezvousNoticeToken(options_.rendezvousKey, kube::uidOf(job)));
  if (!told.isOk())
    log().info(
        "rendezvous store not told of workers gone",
        {{"job", kube::objectKey(kube::namespaceOf(job), kube::nameOf(job))}, {"error", told}});
}

// An elastic job's rendezvous store, its Service and the Secret of its notice token (first, so
// that the store starts with it), created once; a store that exists is kept (restartPolicy Always
// restarts it in place).
Status TrainingJobController::ensureRendezvous(const Json& job) {
  auto& client = manager_.client();
  const std::string ns = kube::namespaceOf(job);
  const std::string token = api::rendezvousNoticeToken(options_.rendezvousKey, kube::uidOf(job));
  for (const auto& [type, object] :
       {std::pair{kube::resources::secrets(), rendezvousSecret(job, token)},
        std::pair{kube::resources::services(), rendezvousService(job)},
        std::pair{kube::resources::pods(), rendezvousPod(job)}}) {
    auto created = client.create(type, ns, object);
    if (!created.isOk() && created.status().code() != StatusCode::kAlreadyExists)
      return created.status();
  }
  return Status::ok();
}

void TrainingJobController::noteCheckpointUri(const Json& job, const JobObservation& o,
                                              JobPlan& plan) {
  const std::string& uri = o.spec.checkpoints->source.uri;
  std::vector<Condition> conditions;
  if (options_.checkpointRoots) {
    if (auto refused =
            checkpointUriCondition(uri, kube::namespaceOf(job), *options_.checkpointRoots))
      conditions.push_back(std::move(*refused));
  }
  const auto userOf = [](const Json& j) {
    return CheckpointsUser{
        .name = kube::nameOf(j),
        .uri = kube::pathValue(j, "spec.checkpoints.uri").as_string(),
        .created =
            kube::parseMetav1Time(kube::metadataField(j, "creationTimestamp")).value_or(WallTime{}),
        .active = !finished(kube::pathValue(j, "status")) &&
                  kube::pathValue(j, "metadata.deletionTimestamp").is_null()};
  };
  CheckpointsUser self = userOf(job);
  self.active = !finished(plan.status);
  std::vector<CheckpointsUser> others;
  for (const auto& other : jobs_->store().byIndex("checkpoints", checkpointsKey(job)))
    if (kube::uidOf(*other) != kube::uidOf(job)) others.push_back(userOf(*other));
  const std::optional<std::string> shared = checkpointsSharedWith(self, others);
  // Said once it is true; afterwards only while the condition is there to turn False.
  if (shared || hasCondition(plan.status, kCheckpointUriShared))
    conditions.push_back(checkpointSharedCondition(uri, shared));
  for (const Condition& c : conditions) {
    const bool was = conditionOf(plan.status, c.type).status;
    setCondition(plan.status["conditions"], c, o.generation, o.now);
    if (c.status && !was)
      plan.events.push_back({.warning = true, .reason = c.type, .message = c.message});
  }
}

void TrainingJobController::noteCheckpointDisk(const Json& job, int64_t generation, Json& status) {
  const Condition disk = checkpointDiskCondition(status.at("checkpoints"));
  const bool wasFull = conditionOf(status, kCheckpointDiskFull).status;
  Json& conditions = status["conditions"];
  setCondition(conditions, disk, generation, clock_.wallNow());
  if (disk.status && !wasFull)
    manager_.recorder().record(job, kube::EventType::kWarning, disk.reason, disk.message);
}

namespace {

CheckpointVolumeReport checkpointReportOf(const std::string& node,
                                          const v1::CheckpointVolumeTelemetry& v) {
  CheckpointVolumeReport report{.node = node,
                                .pendingFiles = v.pending_files(),
                                .pendingBytes = v.pending_bytes(),
                                .uploadLagSeconds = v.upload_lag_seconds(),
                                .lastError = v.last_error()};
  for (const auto& c : v.checkpoints())
    report.checkpoints.push_back({c.name(), c.files(), c.bytes(), c.at_origin()});
  report.diskFull = v.disk_full();
  report.diskFreeBytes = v.disk_free_bytes();
  return report;
}

}  // namespace

void TrainingJobController::assignCheckpointPeers(const Json& job,
                                                  const api::CheckpointVolume& checkpoints,
                                                  const std::vector<CacheNode>& holding,
                                                  const std::vector<CacheNode>& all) {
  std::set<std::string> names, live;
  std::map<std::string, std::string> addresses;
  for (const CacheNode& n : holding) names.insert(n.node.name);
  for (const CacheNode& n : all) {
    addresses[n.node.name] = n.address;
    if (n.node.ready) live.insert(n.node.name);
  }
  const std::vector<std::string> lost =
      lostCheckpointNodes(kube::pathValue(job, "status.checkpoints"), live);
  for (const auto& [node, peers] : checkpointPeersOf(names, checkpoints.copies)) {
    v1::SetCheckpointPeersRequest request;
    request.set_namespace_(kube::namespaceOf(job));
    request.set_uri(checkpoints.source.uri);
    for (const std::string& peer : peers) {
      v1::NodeEndpoint& endpoint = *request.add_peers();
      endpoint.set_node_name(peer);
      endpoint.set_address(addresses[peer]);
    }
    for (const std::string& gone : lost) request.add_lost_nodes(gone);
    if (Status told = options_.cacheNodes->setCheckpointPeers(addresses[node], request);
        !told.isOk())
      log().debug("checkpoint peers not set", {{"node", node}, {"error", told}});
  }
}

TrainingJobController::Summaries TrainingJobController::sampleTelemetry(
    const Json& job, const std::string& key, const api::TrainingJobSpec& spec,
    const std::vector<WorkerState>& workers) {
  const std::string jobUid = kube::uidOf(job), ns = kube::namespaceOf(job);
  {
    MutexLock lock(mutex_);
    const auto last = telemetry_.find(key);
    if (last != telemetry_.end() && last->second.uid != jobUid) {
      telemetry_.erase(last);  // another job of the same name: nothing of the last one shows
    } else if (last != telemetry_.end() &&
               clock_.monoNow() - last->second.sample.at < options_.telemetryInterval) {
      return last->second.shown;
    }
  }
  std::set<std::string> uids, names;
  std::map<std::string, std::vector<std::string>> uidsByNode;
  for (const auto& w : workers) {
    uids.insert(w.uid);
    names.insert(w.name);
    if (!w.node.empty()) uidsByNode[w.node].push_back(w.uid);
  }
  v1::GetTelemetryRequest request;
  for (const auto& d : spec.datasets) {
    v1::DatasetRef& ref = *request.add_datasets();
    ref.set_namespace_(ns);
    ref.set_name(d.name);
  }
  JobSample sample{.at = clock_.monoNow()};
  std::vector<CheckpointVolumeReport> volumes;
  std::vector<CacheNode> holding;  // the nodes that reported the job's checkpoint volume
  const CacheNodes cacheNodes = directory_->nodes();
  for (const auto& cacheNode : *cacheNodes) {
    const auto onNode = uidsByNode.find(cacheNode.node.name);
    if (onNode == uidsByNode.end()) continue;
    auto reply = options_.cacheNodes->telemetry(cacheNode.address, request);
    if (!reply.isOk()) {
      log().debug("no telemetry",
                  {{"job", key}, {"node", cacheNode.node.name}, {"error", reply.status()}});
      continue;
    }
    // Workers of an answering node are in the sample, with zeros until they read.
    for (const auto& uid : onNode->second) sample.workers[uid];
    for (const auto& r : reply->readers()) {
      if (!uids.count(r.pod_uid())) continue;
      WorkerReads& reads = sample.workers[r.pod_uid()];
      reads.waitSeconds += r.read_wait_seconds();
      reads.localBytes += r.reads().local_bytes();
      reads.remoteBytes += r.reads().peer_bytes() + r.reads().origin_bytes();
    }
    for (const auto& g : reply->gpus())
      if (g.pod_namespace() == ns && names.count(g.pod_name()))
        sample.gpus[g.uuid()] = {g.sampled_seconds(), g.busy_seconds(),
                                 g.memory_used_byte_seconds()};
    for (const auto& pod : reply->pods())
      if (pod.namespace_() == ns && names.count(pod.name()))
        sample.starvedSeconds[pod.name()] = pod.data_starved_seconds();
    for (const auto& v : reply->checkpoint_volumes())
      if (spec.checkpoints && v.namespace_() == ns && v.uri() == spec.checkpoints->source.uri &&
          !v.restoring()) {
        volumes.push_back(checkpointReportOf(cacheNode.node.name, v));
        holding.push_back(cacheNode);
      }
  }
  if (spec.checkpoints) assignCheckpointPeers(job, *spec.checkpoints, holding, *cacheNodes);
  Json checkpoints = checkpointSummary(volumes);
  std::string reachedOrigin;  // a checkpoint newly at the origin, for an Event
  Summaries shown;
  {
    MutexLock lock(mutex_);
    Telemetry& last = telemetry_[key];
    last.uid = jobUid;
    const JobSample previous = std::exchange(last.sample, sample);
    Summaries made{dataSummary(previous, sample), gpuSummary(previous, sample)};
    if (!made.data.is_null()) last.shown.data = std::move(made.data);
    if (!made.gpu.is_null()) last.shown.gpu = std::move(made.gpu);
    if (!checkpoints.is_null()) {
      // What the status said last (this process's, or the job's own after a restart).
      const Json before = kube::pathValue(last.shown.checkpoints.is_null()
                                              ? kube::pathValue(job, "status.checkpoints")
                                              : last.shown.checkpoints,
                                          "newestAtOrigin");
      const Json now = kube::pathValue(checkpoints, "newestAtOrigin");
      if (now.is_string() && (!before.is_string() || before.as_string() != now.as_string()))
        reachedOrigin = now.as_string();
      last.shown.checkpoints = std::move(checkpoints);
    }
    shown = last.shown;
  }
  if (!reachedOrigin.empty())
    manager_.recorder().record(job, kube::EventType::kNormal, "CheckpointAtOrigin",
                               "checkpoint " + reachedOrigin + " is at " +
                                   spec.checkpoints->source.uri + ", every file of it");
  return shown;
}

}  // namespace granary::op
