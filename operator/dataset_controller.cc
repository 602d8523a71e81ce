#include "operator/dataset_controller.h"

#include <algorithm>
#include <functional>
#include <set>

#include "common/api/dataset.h"
#include "common/kube/yaml_json.h"
#include "common/log.h"
#include "common/names.h"
#include "operator/cache_node_discovery.h"
#include "operator/core/cache_generation.h"
#include "operator/core/dataset_reference.h"
#include "operator/core/dataset_refresh.h"
#include "operator/core/workers.h"
#include "operator/object_views.h"

namespace granary::op {

using kube::Json;

namespace {

const Logger& log() {
  static const Logger logger("dataset-controller");
  return logger;
}

bool hasFinalizer(const Json& object) {
  const Json finalizers = kube::pathValue(object, "metadata.finalizers");
  if (!finalizers.is_array()) return false;
  for (const auto& f : finalizers.as_array())
    if (f.is_string() && f.as_string() == names::kDatasetFinalizer) return true;
  return false;
}

// `object` with the finalizer added or removed.
Json withFinalizer(const Json& object, bool present) {
  Json next = object;
  Json kept = Json::array();
  const Json finalizers = kube::pathValue(object, "metadata.finalizers");
  if (finalizers.is_array()) {
    for (const auto& f : finalizers.as_array())
      if (!(f.is_string() && f.as_string() == names::kDatasetFinalizer)) kept[kept.size()] = f;
  }
  if (present) kept[kept.size()] = Json::string(names::kDatasetFinalizer);
  next["metadata"]["finalizers"] = kept;
  return next;
}

// "namespace/name" of each Dataset `pod` mounts.
std::vector<std::string> datasetKeysOf(const Json& pod) {
  std::vector<std::string> keys;
  for (const auto& name : datasetsMountedBy(pod))
    keys.push_back(kube::objectKey(kube::namespaceOf(pod), name));
  return keys;
}

// "namespace/name" of each Dataset TrainingJob `job` names.
std::vector<std::string> datasetKeysNamedBy(const Json& job) {
  std::vector<std::string> keys;
  for (const auto& name : datasetsNamedBy(job))
    keys.push_back(kube::objectKey(kube::namespaceOf(job), name));
  return keys;
}

// The index of TrainingJobs by the datasets they name (its own name: the TrainingJob
// controller indexes the same informer).
constexpr const char* kJobsByDataset = "reader-of-dataset";

size_t fingerprintOf(const google::protobuf::Message& request) {
  return std::hash<std::string>()(request.SerializeAsString());
}

Json statusOf(const Json& object) {
  return object.has_object_field("status") ? object.at("status") : Json();
}

// The index of Datasets by the Dataset they refer to.
constexpr const char* kBySource = "source";

std::vector<std::string> sourceKeysOf(const Json& dataset) {
  std::string key = sourceKeyOf(dataset);
  return key.empty() ? std::vector<std::string>{} : std::vector<std::string>{std::move(key)};
}

}  // namespace

DatasetController::DatasetController(kube::Manager& manager, CacheNodeClient& nodes,
                                     const std::string& agentSelector,
                                     DatasetControllerOptions options, Clock& clock)
    : manager_(manager),
      nodes_(nodes),
      options_(options),
      clock_(clock),
      cacheNodes_(manager, options_.cacheNodeNamespace, agentSelector) {
  datasets_ = &manager.informer(
      {.type = kube::resources::datasets(), .ns = options_.ns, .transform = withoutManagedFields});
  workers_ = &manager.informer({.type = kube::resources::pods(),
                                .ns = options_.ns,
                                .labelSelector = names::kJobNameLabel,
                                .transform = workerPodView});
  workers_->store().addIndex("dataset", datasetKeysOf);
  datasets_->store().addIndex(kBySource, sourceKeysOf);
  jobs_ = &manager.informer({.type = kube::resources::trainingJobs(),
                             .ns = options_.ns,
                             .transform = withoutManagedFields});
  jobs_->store().addIndex(kJobsByDataset, datasetKeysNamedBy);
  auto& controller = manager.controller(
      {.name = "dataset", .workers = options_.workers},
      [this](const std::string& key, std::stop_token) { return reconcile(key); });
  // Its own status writes do not come back: warming progress is polled (pollWarming).
  datasets_->addHandler(controller.enqueueOnChange());
  // A reference mirrors its source, and a source lists its references and their readers.
  datasets_->addHandler(controller.enqueueMapped([this](const Json& dataset) {
    std::vector<std::string> keys = sourceKeysOf(dataset);
    for (const auto& r : datasets_->store().byIndex(kBySource, kube::objectKey(dataset)))
      keys.push_back(kube::objectKey(*r));
    return keys;
  }));
  // A cache node coming or going re-plans every Dataset.
  auto everyDataset =
      controller.enqueueMapped([this](const Json&) { return datasets_->store().keys(); });
  cacheNodes_.agents().addHandler(everyDataset);
  // A worker placed or gone changes the readers of the datasets it mounts (and of their
  // sources).
  workers_->addHandler(controller.enqueueMapped(
      [this](const Json& pod) { return withSources(datasetKeysOf(pod)); }));
  // A job starting or ending its wait for its datasets (BeforeStart) changes their readers.
  jobs_->addHandler(controller.enqueueMapped(
      [this](const Json& job) { return withSources(datasetKeysNamedBy(job)); }));
}

Result<kube::ReconcileResult> DatasetController::reconcile(const std::string& key) {
  const kube::ObjectPtr object = datasets_->store().get(key);
  if (!object) return kube::ReconcileResult::done();
  if (!kube::pathValue(*object, "metadata.deletionTimestamp").is_null()) return finalize(*object);
  if (!hasFinalizer(*object)) {
    // Nothing is cached before the finalizer is on: a deletion can always purge.
    auto updated =
        manager_.client().update(kube::resources::datasets(), withFinalizer(*object, true));
    if (!updated.isOk()) return updated.status();
    return kube::ReconcileResult::done();  // the update comes back through the informer
  }
  const DatasetPlanOptions planning{.pollWarming = options_.pollWarming,
                                    .pollReady = options_.pollReady,
                                    .reensureInterval = options_.reensureInterval};
  Result<api::Dataset> decoded = decodeDataset(*object);
  if (decoded.isOk() && decoded->spec.reference) return reconcileReference(*object, *decoded);
  const std::vector<std::string> referrers = referrersOf(*object);
  if (!decoded.isOk()) {
    DatasetPlan plan = planDataset(observe(*object, decoded, nullptr), planning);
    plan.status = withReferrers(std::move(plan.status), referrers);
    return apply(*object, plan, {});
  }
  // The nodes hold it under the generation of what is cached (a change of spec.sharing alone
  // caches nothing again).
  const CacheGeneration cache = cacheGenerationOf(*object);
  decoded->metadata.generation = cache.generation;
  const api::Dataset& dataset = *decoded;
  const Requests requests = requestsFor(*object, dataset, referrers);
  DatasetObservation observation = observe(*object, decoded, &requests);
  DatasetPlan plan = planDataset(observation, planning);
  std::map<std::string, OriginCredentials> credentials;
  if (plan.readCredentials) {
    observation.credentials = readCredentials(dataset, credentials);
    plan = planDataset(observation, planning);
  }
  plan.status = withCacheGeneration(withReferrers(std::move(plan.status), referrers), cache);
  followVersions(*object, dataset, requests, observation, referrers, plan);
  return apply(*object, plan, {&dataset, &requests, &credentials});
}

void DatasetController::followVersions(const Json& object, const api::Dataset& dataset,
                                       const Requests& requests,
                                       const DatasetObservation& observation,
                                       const std::vector<std::string>& referrers,
                                       DatasetPlan& plan) {
  const v1::DatasetRef& current = requests.bare.dataset();
  RefreshStep refreshed = refresh(object, dataset, current, requests.set, plan);
  plan.status = std::move(refreshed.status);
  if (refreshed.requeueAfter &&
      (plan.requeueAfter.count() == 0 || *refreshed.requeueAfter < plan.requeueAfter))
    plan.requeueAfter = *refreshed.requeueAfter;
  if (refreshed.event) {
    if (plan.event)
      recordEvent(object, *refreshed.event);
    else
      plan.event = std::move(refreshed.event);
  }
  bool settledEverywhere = true;
  for (const auto& [node, answer] : observation.answers) {
    settledEverywhere =
        settledEverywhere && answer.status.isOk() && isSettled(answer.status->phase);
    if (answer.status.isOk())
      reportGoneFromOrigin(object, current.generation(), answer.status->goneFromOrigin);
  }
  if (settledEverywhere)
    retireOtherVersions(object, requests.set, current, pinnedVersions(object, referrers));
}

RefreshStep DatasetController::refresh(const Json& object, const api::Dataset& dataset,
                                       const v1::DatasetRef& current, const NodeSetPlan& set,
                                       const DatasetPlan& plan) {
  const std::optional<DatasetPhase> phase = phaseOfStatus(plan.status);
  const RefreshObservation o{
      .interval = dataset.spec.refresh.interval,
      .requested = kube::stringMap(object, "annotations")[names::kRefreshRequestedAnnotation],
      .previous = statusOf(object),
      .version = current.generation(),
      .generation = kube::generationOf(object),
      .settled = phase && isSettled(*phase) && !set.nodes.empty(),
      .now = clock_.wallNow()};
  const std::optional<RefreshAsk> ask = refreshToAsk(o);
  Result<RefreshAnswer> answer = notFound("not asked");
  if (ask) {
    answer = askRefresh(set, current, *ask);
    log().info("refresh", {{"dataset", kube::objectKey(object)},
                           {"version", current.generation()},
                           {"next_version", ask->next},
                           {"result", answer.isOk() ? Status::ok() : answer.status()}});
  }
  return refreshStep(o, plan.status, ask, answer);
}

Result<RefreshAnswer> DatasetController::askRefresh(const NodeSetPlan& set,
                                                    const v1::DatasetRef& current,
                                                    const RefreshAsk& ask) {
  std::string name = ask.lister.empty() ? set.nodes.front().node.name : ask.lister;
  for (int hop = 0; hop < 2; ++hop) {  // the node asked names the lister when it is not
    const auto node = std::find_if(set.nodes.begin(), set.nodes.end(),
                                   [&](const CacheNode& n) { return n.node.name == name; });
    if (node == set.nodes.end())
      return unavailable("cache node " + name + ", which lists version " +
                         std::to_string(ask.next) + ", is not in the dataset's node set");
    GRANARY_ASSIGN_OR_RETURN(const v1::RefreshDatasetResponse response,
                             nodes_.refresh(node->address, current, ask.next));
    if (response.state() != v1::RefreshDatasetResponse::STATE_ELSEWHERE)
      return refreshAnswerOf(response, name);
    name = response.lister();
  }
  return unavailable("the cache nodes of the set do not agree which of them lists version " +
                     std::to_string(ask.next));
}

std::vector<std::string> DatasetController::withSources(std::vector<std::string> keys) const {
  const size_t own = keys.size();
  for (size_t i = 0; i < own; ++i) {
    const kube::ObjectPtr dataset = datasets_->store().get(keys[i]);
    if (!dataset) continue;
    if (std::string source = sourceKeyOf(*dataset); !source.empty())
      keys.push_back(std::move(source));
  }
  return keys;
}

std::vector<std::string> DatasetController::referrersOf(const Json& source) const {
  return referrersOffered(source, datasets_->store().byIndex(kBySource, kube::objectKey(source)));
}

Result<kube::ReconcileResult> DatasetController::reconcileReference(const Json& object,
                                                                    const api::Dataset& dataset) {
  const api::DatasetReference& reference = *dataset.spec.reference;
  const kube::ObjectPtr source = datasets_->store().get(reference.key());
  const bool live = source && kube::pathValue(*source, "metadata.deletionTimestamp").is_null();
  const Json previous = statusOf(object);
  const ReferencePlan plan =
      planReference({.ns = dataset.metadata.namespace_,
                     .generation = kube::generationOf(object),
                     .reference = reference,
                     .source = live ? source.get() : nullptr,
                     .previousStatus = previous,
                     .now = clock_.wallNow()},
                    {.pollWarming = options_.pollWarming, .pollReady = options_.pollReady});
  const v1::DatasetRef ref = refOf(dataset.metadata);
  const std::set<std::string> serving(plan.nodes.begin(), plan.nodes.end());
  const bool wasOnNodes = !nodesListedIn(previous).empty();
  std::vector<std::pair<std::string, CutOffPod>> cutOff;
  for (const auto& node : *cacheNodes_.nodes()) {
    if (plan.serve && serving.contains(node.node.name)) {
      for (auto& pod : ensureView(node, ref, reference)) cutOff.emplace_back(node.node.name, pod);
    } else if (wasOnNodes) {
      // No new mount of a reference that is no longer served, nor where its source left.
      auto purged = nodes_.purge(node.address, ref, true);
      if (!purged.isOk() && purged.status().code() != StatusCode::kNotFound)
        log().info("cannot drop a view from a node; tried again at the next poll",
                   {{"dataset", kube::objectKey(object)},
                    {"node", node.node.name},
                    {"error", purged.status()}});
    }
  }
  GRANARY_RETURN_IF_ERROR(writeStatus(object, plan.status, plan.event));
  markCutOff(object, cutOff);
  return kube::ReconcileResult::after(plan.requeueAfter);
}

std::vector<CutOffPod> DatasetController::ensureView(const CacheNode& node,
                                                     const v1::DatasetRef& ref,
                                                     const api::DatasetReference& reference) {
  const auto held = nodes_.status(node.address, ref);
  if (held.isOk()) return held->cutOff;  // the node has the view (the source's status)
  if (held.status().code() != StatusCode::kNotFound) return {};  // unreachable: the next poll
  v1::EnsureDatasetRequest request;
  *request.mutable_dataset() = ref;
  request.mutable_view()->mutable_source()->set_namespace_(reference.ns);
  request.mutable_view()->mutable_source()->set_name(reference.name);
  request.mutable_view()->set_path(reference.path);
  auto ensured = nodes_.ensure(node.address, request);
  log().info("view ensured", {{"dataset", ref.namespace_() + "/" + ref.name()},
                              {"source", reference.key()},
                              {"node", node.node.name},
                              {"result", ensured.isOk() ? Status::ok() : ensured.status()}});
  return {};
}

DatasetController::Requests DatasetController::requestsFor(
    const Json& object, const api::Dataset& dataset, const std::vector<std::string>& referrers) {
  Requests r{.set = planNodeSet(dataset.spec.cache, *cacheNodes_.nodes(),
                                nodesListedIn(statusOf(object)))};
  r.bare = ensureRequestOf(dataset, {}, r.set);
  r.fingerprint = fingerprintOf(r.bare);
  // Its readers, and those of the Datasets that refer to it: they read its bytes.
  std::vector<DatasetReader> readers;
  std::vector<std::string> keys = referrers;
  keys.push_back(kube::objectKey(object));
  for (const auto& key : keys) {
    const std::string name = key.substr(key.find('/') + 1);
    for (auto& worker : readersOf(workers_->store().byIndex("dataset", key), name))
      readers.push_back(std::move(worker));
    for (auto& waiting : waitingReadersOf(jobs_->store().byIndex(kJobsByDataset, key), name))
      readers.push_back(std::move(waiting));
  }
  r.warmPlan = warmPlanRequestOf(r.bare.dataset(), readers);
  r.warmPlanFingerprint = fingerprintOf(r.warmPlan);
  r.noReaders = fingerprintOf(warmPlanRequestOf(r.bare.dataset(), {}));
  return r;
}

DatasetObservation DatasetController::observe(const Json& object,
                                              const Result<api::Dataset>& dataset,
                                              const Requests* requests) {
  DatasetObservation o{.generation = kube::generationOf(object),
                       .dataset = dataset,
                       .previousStatus = statusOf(object),
                       .now = clock_.wallNow()};
  if (!requests) return o;
  o.set = requests->set;
  o.hasReaders = requests->warmPlan.readers_size() > 0;
  const std::string uid = kube::uidOf(object);
  for (const auto& node : requests->set.nodes) {
    NodeAnswer& answer = o.answers[node.node.name];
    answer.status = nodes_.status(node.address, requests->bare.dataset());
    MutexLock lock(mutex_);
    const auto it = ensured_.find(uid + "/" + node.address);
    if (it == ensured_.end()) continue;
    if (it->second.fingerprint == requests->fingerprint)
      answer.ensuredAgo =
          std::chrono::duration_cast<std::chrono::milliseconds>(clock_.monoNow() - it->second.at);
    answer.readersAnnounced = it->second.warmPlan == requests->warmPlanFingerprint;
  }
  return o;
}

Status DatasetController::readCredentials(const api::Dataset& dataset,
                                          std::map<std::string, OriginCredentials>& credentials) {
  for (const auto& mount : dataset.spec.mounts) {
    if (!mount.source.secretRef) continue;
    const std::string& name = mount.source.secretRef->name;
    auto secret =
        manager_.client().get(kube::resources::secrets(), dataset.metadata.namespace_, name);
    if (!secret.isOk()) {
      return Status(secret.status().code(),
                    "Secret " + name + " (spec" +
                        (mount.name.empty() ? ".source" : ".mounts[" + mount.name + "].source") +
                        ".secretRef): " + secret.status().message());
    }
    GRANARY_ASSIGN_OR_RETURN(credentials[mount.name], credentialsOf(*secret));
  }
  return Status::ok();
}

Result<kube::ReconcileResult> DatasetController::apply(const Json& object, const DatasetPlan& plan,
                                                       const Applying& with) {
  const std::string uid = kube::uidOf(object);
  for (const auto& address : plan.forget) forget(uid + "/" + address);  // may restart empty
  for (const auto& node : plan.purge) {
    auto purged = nodes_.purge(node.address, refOf(with.dataset->metadata), true);
    log().info("purged from a node the dataset left",
               {{"dataset", kube::objectKey(object)},
                {"node", node.node.name},
                {"result", purged.isOk() ? Status::ok() : purged.status()}});
  }
  for (const auto& node : plan.ensure) {
    const Status rejected = ensure(*with.dataset, node, *with.requests, *with.credentials);
    if (rejected.isOk()) continue;
    const Json status =
        problemStatus(statusOf(object), kube::generationOf(object), DatasetPhase::kFailed,
                      "InvalidSpec", rejected.message(), clock_.wallNow());
    GRANARY_RETURN_IF_ERROR(
        writeStatus(object, status, DatasetEvent{true, "InvalidSpec", rejected.message()}));
    return kube::ReconcileResult::terminal(rejected);
  }
  for (const auto& node : plan.announceReaders)
    announceReaders(uid + "/" + node.address, node.address, with.requests->warmPlan,
                    with.requests->warmPlanFingerprint);
  GRANARY_RETURN_IF_ERROR(writeStatus(object, plan.status, plan.event));
  markCutOff(object, plan.cutOff);
  if (plan.terminal) return kube::ReconcileResult::terminal(*plan.terminal);
  return kube::ReconcileResult::after(plan.requeueAfter);
}

Status DatasetController::ensure(const api::Dataset& dataset, const CacheNode& node,
                                 const Requests& requests,
                                 const std::map<std::string, OriginCredentials>& credentials) {
  auto ensured = nodes_.ensure(node.address, ensureRequestOf(dataset, credentials, requests.set));
  const std::string memo = dataset.metadata.uid + "/" + node.address;
  if (ensured.isOk()) {
    {
      MutexLock lock(mutex_);
      ensured_[memo] = {requests.fingerprint, clock_.monoNow(), requests.noReaders};
    }
    return Status::ok();
  }
  forget(memo);
  // A spec the node refuses (PermissionDenied: a file:// source in another namespace's directory
  // of a root of namespaces) fails the Dataset; anything else is tried again.
  if (ensured.status().code() == StatusCode::kInvalidArgument ||
      ensured.status().code() == StatusCode::kPermissionDenied)
    return invalidArgument(inSpecTerms(ensured.status().message(), dataset));
  log().info("ensure failed; tried again at the next poll",
             {{"dataset", dataset.metadata.namespace_ + "/" + dataset.metadata.name},
              {"node", node.node.name},
              {"error", ensured.status()}});
  return Status::ok();
}

void DatasetController::forget(const std::string& memo) {
  MutexLock lock(mutex_);
  ensured_.erase(memo);
}

void DatasetController::announceReaders(const std::string& memo, const std::string& address,
                                        const v1::SetWarmPlanRequest& plan, size_t fingerprint) {
  {
    MutexLock lock(mutex_);
    const auto it = ensured_.find(memo);
    if (it == ensured_.end() || it->second.warmPlan == fingerprint) return;
  }
  const Status sent = nodes_.setWarmPlan(address, plan);
  log().info("readers announced",
             {{"dataset", plan.dataset().namespace_() + "/" + plan.dataset().name()},
              {"node", address},
              {"readers", plan.readers_size()},
              {"result", sent}});
  MutexLock lock(mutex_);
  const auto it = ensured_.find(memo);
  if (sent.isOk() && it != ensured_.end()) it->second.warmPlan = fingerprint;
}

std::set<int64_t> DatasetController::pinnedVersions(
    const Json& object, const std::vector<std::string>& referrers) const {
  std::set<int64_t> pinned;
  std::vector<std::string> keys = referrers;
  keys.push_back(kube::objectKey(object));
  for (const auto& key : keys) {
    pinned.merge(versionsPinnedBy(jobs_->store().byIndex(kJobsByDataset, key),
                                  key.substr(key.find('/') + 1)));
  }
  return pinned;
}

void DatasetController::retireOtherVersions(const Json& object, const NodeSetPlan& set,
                                            const v1::DatasetRef& current, std::set<int64_t> kept) {
  const std::string uid = kube::uidOf(object);
  const auto isOther = [&](const v1::DatasetRef& ref) {
    return ref.namespace_() == current.namespace_() && ref.name() == current.name() &&
           ref.generation() != current.generation();
  };
  // What each node not known to be done holds; a version read on any node is kept on all, since
  // a reader's node takes the chunks others own from them.
  std::vector<std::pair<const CacheNode*, std::vector<CacheNodeClient::Held>>> holding;
  for (const auto& node : set.nodes) {
    {
      MutexLock lock(mutex_);
      const auto it = ensured_.find(uid + "/" + node.address);
      if (it == ensured_.end()) return;  // not ensured by this process yet: the next poll
      if (it->second.othersRetired) continue;
    }
    auto held = nodes_.list(node.address);
    if (!held.isOk()) return;  // tried again at the next poll
    for (const auto& [ref, progress] : *held) {
      if (!isOther(ref)) continue;
      if (progress.readers > 0) kept.insert(ref.generation());
      reportGoneFromOrigin(object, ref.generation(), progress.goneFromOrigin);
    }
    holding.emplace_back(&node, std::move(*held));
  }
  for (const auto& [node, held] : holding) {
    bool left = false;
    for (const auto& [ref, progress] : held) {
      if (!isOther(ref)) continue;
      if (kept.contains(ref.generation())) {
        left = true;
        continue;
      }
      auto purged = nodes_.purge(node->address, ref, false);
      left = left || (!purged.isOk() && purged.status().code() != StatusCode::kNotFound);
      log().info("older version purged",
                 {{"dataset", current.namespace_() + "/" + current.name()},
                  {"version", ref.generation()},
                  {"node", node->node.name},
                  {"result", purged.isOk() ? Status::ok() : purged.status()}});
    }
    MutexLock lock(mutex_);
    const auto it = ensured_.find(uid + "/" + node->address);
    if (!left && it != ensured_.end()) it->second.othersRetired = true;
  }
}

void DatasetController::reportGoneFromOrigin(const Json& dataset, int64_t version,
                                             const std::vector<std::string>& paths) {
  std::vector<std::string> fresh;
  {
    MutexLock lock(mutex_);
    for (const auto& path : paths)
      if (reportedGone_.insert(kube::uidOf(dataset) + "/" + std::to_string(version) + "/" + path)
              .second)
        fresh.push_back(path);
  }
  if (!fresh.empty()) recordEvent(dataset, goneFromOriginEvent(version, fresh));
}

void DatasetController::recordEvent(const Json& dataset, const DatasetEvent& event) {
  manager_.recorder().record(dataset,
                             event.warning ? kube::EventType::kWarning : kube::EventType::kNormal,
                             event.reason, event.message);
}

void DatasetController::markCutOff(const Json& dataset,
                                   const std::vector<std::pair<std::string, CutOffPod>>& cutOff) {
  for (const auto& [node, cut] : cutOff) {
    // A worker pod from the informer; another pod asked for (it may have gone meanwhile).
    kube::ObjectPtr known = workers_->store().get(cut.podNamespace + "/" + cut.podName);
    if (known && kube::stringMap(*known, "annotations").contains(names::kMountLostAnnotation))
      continue;
    auto pod = manager_.client().get(kube::resources::pods(), cut.podNamespace, cut.podName);
    if (!pod.isOk() || kube::uidOf(*pod) != cut.podUid) continue;  // gone, or another by its name
    if (kube::stringMap(*pod, "annotations").contains(names::kMountLostAnnotation)) continue;
    const std::string what = "Dataset " + kube::objectKey(dataset) + " on node " + node +
                             " since " + kube::metav1Time(cut.since);
    Json annotations = Json::object();
    annotations[names::kMountLostAnnotation] = Json::string(what);
    Json metadata = Json::object();
    metadata["annotations"] = annotations;
    Json patch = Json::object();
    patch["metadata"] = metadata;
    const auto marked =
        manager_.client().mergePatch(kube::resources::pods(), cut.podNamespace, cut.podName, patch);
    if (!marked.isOk()) {
      log().info("cannot mark a pod cut off from its dataset; tried again at the next poll",
                 {{"pod", cut.podNamespace + "/" + cut.podName}, {"error", marked.status()}});
      continue;
    }
    manager_.recorder().record(
        *pod, kube::EventType::kWarning, "DatasetMountLost",
        "this pod's view of " + what +
            " ended (granary's cache node was replaced without handing over, or killed): its "
            "reads fail until it is restarted. Restart the pod; a TrainingJob restarts its "
            "workers");
    manager_.recorder().record(dataset, kube::EventType::kWarning, "ReadersCutOff",
                               "pod " + cut.podNamespace + "/" + cut.podName + " on node " + node +
                                   " lost its view of this dataset: restart it");
    log().warn("a pod lost its view of the dataset", {{"dataset", kube::objectKey(dataset)},
                                                      {"pod", cut.podNamespace + "/" + cut.podName},
                                                      {"node", node}});
  }
}

Status DatasetController::writeStatus(const Json& dataset, const Json& status,
                                      const std::optional<DatasetEvent>& event) {
  if (!kube::sameJson(status, statusOf(dataset))) {
    Json next = dataset;
    next["status"] = status;
    auto written = manager_.client().updateStatus(kube::resources::datasets(), next);
    if (!written.isOk()) return written.status();
  }
  if (event) {
    recordEvent(dataset, *event);
    const std::optional<DatasetPhase> phase = phaseOfStatus(status);
    log().info("phase", {{"dataset", kube::objectKey(dataset)},
                         {"phase", phase ? api::datasetPhaseName(*phase) : "-"},
                         {"reason", event->reason}});
  }
  return Status::ok();
}

Result<kube::ReconcileResult> DatasetController::finalize(const Json& dataset) {
  if (!hasFinalizer(dataset)) return kube::ReconcileResult::done();
  v1::DatasetRef ref;
  ref.set_namespace_(kube::namespaceOf(dataset));
  ref.set_name(kube::nameOf(dataset));
  ref.set_uid(kube::uidOf(dataset));
  // Every node that may hold a generation of it: those in status, and today's cache nodes.
  std::set<std::string> holders;
  const Json nodes = kube::pathValue(dataset, "status.nodes");
  if (nodes.is_array())
    for (const auto& n : nodes.as_array())
      if (n.has_string_field("name")) holders.insert(n.at("name").as_string());
  std::vector<std::string> unreachable;
  for (const auto& node : *cacheNodes_.nodes()) {
    auto purged = nodes_.purge(node.address, ref, true);
    if (purged.isOk() || purged.status().code() == StatusCode::kNotFound) {
      holders.erase(node.node.name);
      continue;
    }
    if (holders.count(node.node.name))
      unreachable.push_back(node.node.name + ": " + purged.status().message());
    holders.erase(node.node.name);
  }
  // Nodes left in `holders` are gone: nothing to ask.
  if (!unreachable.empty()) {
    const auto since =
        kube::parseMetav1Time(kube::pathValue(dataset, "metadata.deletionTimestamp").as_string());
    const bool waiting = since && clock_.wallNow() - *since < options_.purgeTimeout;
    std::string list;
    for (const auto& u : unreachable) list += (list.empty() ? "" : "; ") + u;
    if (waiting) {
      manager_.recorder().record(dataset, kube::EventType::kWarning, "PurgeRetrying",
                                 "cannot purge the cache on " + list);
      return kube::ReconcileResult::after(options_.pollWarming);
    }
    manager_.recorder().record(dataset, kube::EventType::kWarning, "PurgeIncomplete",
                               "gave up purging after " +
                                   std::to_string(options_.purgeTimeout.count() / 1000) +
                                   " s; cached data stays on " + list);
  }
  {
    MutexLock lock(mutex_);
    const std::string uid = kube::uidOf(dataset);
    for (auto it = ensured_.lower_bound(uid); it != ensured_.end() && it->first.starts_with(uid);)
      it = ensured_.erase(it);
    for (auto it = reportedGone_.lower_bound(uid);
         it != reportedGone_.end() && it->starts_with(uid);)
      it = reportedGone_.erase(it);
  }
  auto updated =
      manager_.client().update(kube::resources::datasets(), withFinalizer(dataset, false));
  if (!updated.isOk() && updated.status().code() != StatusCode::kNotFound) return updated.status();
  log().info("purged", {{"dataset", kube::objectKey(dataset)}});
  return kube::ReconcileResult::done();
}

}  // namespace granary::op
