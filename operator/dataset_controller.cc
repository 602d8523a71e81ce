#include "operator/dataset_controller.h"

#include <functional>
#include <set>

#include "common/api/dataset.h"
#include "common/log.h"
#include "common/names.h"
#include "operator/cache_node_discovery.h"
#include "operator/core/conditions.h"
#include "operator/core/workers.h"
#include "operator/ensure_request.h"

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

// The Dataset as granary reads it: metadata and a spec with defaults and every rule checked.
Result<api::Dataset> decodeDataset(const Json& object) {
  GRANARY_ASSIGN_OR_RETURN(config::Node root,
                           config::parse(object.serialize(), "Dataset " + kube::objectKey(object)));
  api::Dataset dataset;
  if (const config::Node* metadata = root.find("metadata"))
    GRANARY_RETURN_IF_ERROR(decodeValue(*metadata, dataset.metadata));
  const config::Node* spec = root.find("spec");
  if (spec == nullptr) return invalidArgument("spec: required; name a source");
  GRANARY_RETURN_IF_ERROR(decodeValue(*spec, dataset.spec));
  return dataset;
}

// "namespace/name" of each Dataset `pod` mounts.
std::vector<std::string> datasetKeysOf(const Json& pod) {
  std::vector<std::string> keys;
  for (const auto& name : datasetsMountedBy(pod))
    keys.push_back(kube::objectKey(kube::namespaceOf(pod), name));
  return keys;
}

size_t fingerprintOf(const google::protobuf::Message& request) {
  return std::hash<std::string>()(request.SerializeAsString());
}

std::string phaseOfStatus(const Json& object) {
  const Json phase = kube::pathValue(object, "status.phase");
  return phase.is_string() ? phase.as_string() : std::string();
}

}  // namespace

DatasetController::DatasetController(kube::Manager& manager, CacheNodeClient& nodes,
                                     const std::string& agentSelector,
                                     DatasetControllerOptions options, Clock& clock)
    : manager_(manager), nodes_(nodes), options_(options), clock_(clock) {
  datasets_ = &manager.informer({.type = kube::resources::datasets(), .ns = options_.ns});
  agents_ = &manager.informer({.type = kube::resources::pods(),
                               .ns = options_.cacheNodeNamespace,
                               .labelSelector = agentSelector});
  kubeNodes_ = &manager.informer({.type = kube::resources::nodes()});
  workers_ = &manager.informer(
      {.type = kube::resources::pods(), .ns = options_.ns, .labelSelector = names::kJobNameLabel});
  workers_->store().addIndex("dataset", datasetKeysOf);
  auto& controller = manager.controller(
      {.name = "dataset", .workers = options_.workers},
      [this](const std::string& key, std::stop_token) { return reconcile(key); });
  // Its own status writes do not come back: warming progress is polled (pollWarming).
  datasets_->addHandler(controller.enqueueOnChange());
  // A cache node coming or going re-plans every Dataset.
  auto everyDataset =
      controller.enqueueMapped([this](const Json&) { return datasets_->store().keys(); });
  agents_->addHandler(everyDataset);
  // A worker placed or gone changes the readers of the datasets it mounts.
  workers_->addHandler(controller.enqueueMapped(datasetKeysOf));
}

std::vector<CacheNode> DatasetController::cacheNodes() {
  return discoverCacheNodes(agents_->store().list(), kubeNodes_->store());
}

Result<kube::ReconcileResult> DatasetController::reconcile(const std::string& key) {
  const kube::ObjectPtr object = datasets_->store().get(key);
  if (!object) return kube::ReconcileResult{};
  const Json& dataset = *object;
  if (!kube::pathValue(dataset, "metadata.deletionTimestamp").is_null()) return finalize(dataset);
  if (!hasFinalizer(dataset)) {
    // Nothing is cached before the finalizer is on: a deletion can always purge.
    auto updated =
        manager_.client().update(kube::resources::datasets(), withFinalizer(dataset, true));
    if (!updated.isOk()) return updated.status();
    return kube::ReconcileResult{};  // the update comes back through the informer
  }
  const Json previous = dataset.has_object_field("status") ? dataset.at("status") : Json::object();
  const auto now = clock_.wallNow();
  const int64_t generation = kube::generationOf(dataset);
  const auto problem = [&](DatasetPhase phase, const std::string& reason,
                           const std::string& message) -> Result<kube::ReconcileResult> {
    GRANARY_RETURN_IF_ERROR(
        writeStatus(dataset, problemStatus(previous, generation, phase, reason, message, now)));
    return kube::ReconcileResult{.requeueAfter = options_.pollWarming * 3};
  };

  auto decoded = decodeDataset(dataset);
  if (!decoded.isOk()) {
    GRANARY_RETURN_IF_ERROR(
        writeStatus(dataset, problemStatus(previous, generation, DatasetPhase::kFailed,
                                           "InvalidSpec", decoded.status().message(), now)));
    return kube::ReconcileResult{};  // a spec change brings it back
  }
  api::Dataset& spec = *decoded;
  if (spec.metadata.generation == 0) spec.metadata.generation = generation;

  const NodeSetPlan plan = planNodeSet(spec.spec.cache, cacheNodes());
  if (plan.nodes.empty()) {
    std::string why;
    for (const auto& [node, reason] : plan.excluded) why += "; " + node + ": " + reason;
    return problem(DatasetPhase::kPending, "NoCacheNodes",
                   "no granary-cache-node may hold this dataset" + why);
  }

  // Credentials, read by name from the Dataset's own namespace only when a node needs them.
  std::map<std::string, OriginCredentials> credentials;
  bool credentialsRead = false;
  const auto readCredentials = [&]() -> Status {
    if (credentialsRead) return Status::ok();
    for (const auto& mount : spec.spec.mounts) {
      if (!mount.source.secretRef) continue;
      const std::string& name = mount.source.secretRef->name;
      auto secret =
          manager_.client().get(kube::resources::secrets(), spec.metadata.namespace_, name);
      if (!secret.isOk()) {
        return Status(secret.status().code(),
                      "Secret " + name + " (spec" +
                          (mount.name.empty() ? ".source" : ".mounts[" + mount.name + "].source") +
                          ".secretRef): " + secret.status().message());
      }
      GRANARY_ASSIGN_OR_RETURN(credentials[mount.name], credentialsOf(*secret));
    }
    credentialsRead = true;
    return Status::ok();
  };

  // Fingerprint of what each node is asked, without credentials.
  const v1::EnsureDatasetRequest bare = ensureRequestOf(spec, {}, plan);
  const size_t fingerprint = fingerprintOf(bare);
  const v1::SetWarmPlanRequest warmPlan = warmPlanRequestOf(
      bare.dataset(), readersOf(workers_->store().byIndex("dataset", key), spec.metadata.name));
  const size_t warmPlanFingerprint = fingerprintOf(warmPlan);
  const size_t noReaders = fingerprintOf(warmPlanRequestOf(bare.dataset(), {}));
  DatasetObservation observation{.generation = generation, .replicas = spec.spec.cache.replicas};
  for (const auto& node : plan.nodes) {
    const std::string memo = spec.metadata.uid + "/" + node.address;
    bool fresh;
    {
      std::lock_guard lock(mutex_);
      const auto it = ensured_.find(memo);
      fresh = it != ensured_.end() && it->second.fingerprint == fingerprint &&
              clock_.monoNow() - it->second.at < options_.reensureInterval;
    }
    Result<NodeProgress> progress = fresh ? nodes_.status(node.address, bare.dataset())
                                          : Result<NodeProgress>(notFound("not ensured yet"));
    if (!progress.isOk() && progress.status().code() == StatusCode::kNotFound) {
      if (Status read = readCredentials(); !read.isOk()) {
        const bool missing = read.code() == StatusCode::kNotFound;
        manager_.recorder().record(dataset, kube::EventType::kWarning,
                                   missing ? "SecretNotFound" : "InvalidSecret", read.message());
        return problem(DatasetPhase::kPending, missing ? "SecretNotFound" : "InvalidSecret",
                       read.message());
      }
      progress = nodes_.ensure(node.address, ensureRequestOf(spec, credentials, plan));
      if (progress.isOk()) {
        std::lock_guard lock(mutex_);
        ensured_[memo] = {fingerprint, clock_.monoNow(), noReaders};
        observation.replanned = true;
        purgeOtherGenerations(node.address, bare.dataset());
      } else if (progress.status().code() == StatusCode::kInvalidArgument) {
        manager_.recorder().record(dataset, kube::EventType::kWarning, "InvalidSpec",
                                   progress.status().message());
        GRANARY_RETURN_IF_ERROR(
            writeStatus(dataset, problemStatus(previous, generation, DatasetPhase::kFailed,
                                               "InvalidSpec", progress.status().message(), now)));
        return kube::ReconcileResult{};
      }
    }
    NodeReport report{.nodeName = node.node.name};
    if (progress.isOk()) {
      report.progress = std::move(*progress);
      announceReaders(memo, node.address, warmPlan, warmPlanFingerprint);
    } else {
      report.error = progress.status().message();
      std::lock_guard lock(mutex_);
      ensured_.erase(memo);  // it may have restarted empty
    }
    observation.reports.push_back(std::move(report));
  }
  Json status = datasetStatus(observation, previous, now);
  const bool ready = status.at("phase").as_string() == "Ready";
  GRANARY_RETURN_IF_ERROR(writeStatus(dataset, std::move(status)));
  return kube::ReconcileResult{.requeueAfter = ready ? options_.pollReady : options_.pollWarming};
}

void DatasetController::announceReaders(const std::string& memo, const std::string& address,
                                        const v1::SetWarmPlanRequest& plan, size_t fingerprint) {
  {
    std::lock_guard lock(mutex_);
    const auto it = ensured_.find(memo);
    if (it == ensured_.end() || it->second.warmPlan == fingerprint) return;
  }
  const Status sent = nodes_.setWarmPlan(address, plan);
  log().info("readers announced",
             {{"dataset", plan.dataset().namespace_() + "/" + plan.dataset().name()},
              {"node", address},
              {"readers", plan.readers_size()},
              {"result", sent}});
  std::lock_guard lock(mutex_);
  const auto it = ensured_.find(memo);
  if (sent.isOk() && it != ensured_.end()) it->second.warmPlan = fingerprint;
}

void DatasetController::purgeOtherGenerations(const std::string& address,
                                              const v1::DatasetRef& current) {
  auto held = nodes_.list(address);
  if (!held.isOk()) return;  // tried again at the next ensure
  for (const auto& ref : *held) {
    if (ref.namespace_() != current.namespace_() || ref.name() != current.name() ||
        ref.generation() == current.generation())
      continue;
    auto purged = nodes_.purge(address, ref, false);
    log().info("old generation purged",
               {{"dataset", current.namespace_() + "/" + current.name()},
                {"generation", ref.generation()},
                {"node", address},
                {"result", purged.isOk() ? Status::ok() : purged.status()}});
  }
}

Status DatasetController::writeStatus(const Json& dataset, Json status) {
  const Json previous = dataset.has_object_field("status") ? dataset.at("status") : Json::object();
  if (kube::sameJson(status, previous)) return Status::ok();
  Json next = dataset;
  next["status"] = std::move(status);
  auto written = manager_.client().updateStatus(kube::resources::datasets(), next);
  if (!written.isOk()) return written.status();
  const std::string before =
      previous.has_string_field("phase") ? previous.at("phase").as_string() : "";
  const std::string after = phaseOfStatus(next);
  if (after != before) {
    const Condition ready = conditionOf(next.at("status"), "Ready");
    const bool bad = after == "Failed" || after == "Degraded" ||
                     (after == "Pending" && ready.reason != "Pending");
    manager_.recorder().record(dataset, bad ? kube::EventType::kWarning : kube::EventType::kNormal,
                               ready.reason, ready.message);
    log().info("phase",
               {{"dataset", kube::objectKey(dataset)}, {"phase", after}, {"reason", ready.reason}});
  }
  return Status::ok();
}

Result<kube::ReconcileResult> DatasetController::finalize(const Json& dataset) {
  if (!hasFinalizer(dataset)) return kube::ReconcileResult{};
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
  for (const auto& node : cacheNodes()) {
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
      return kube::ReconcileResult{.requeueAfter = options_.pollWarming};
    }
    manager_.recorder().record(dataset, kube::EventType::kWarning, "PurgeIncomplete",
                               "gave up purging after " +
                                   std::to_string(options_.purgeTimeout.count() / 1000) +
                                   " s; cached data stays on " + list);
  }
  {
    std::lock_guard lock(mutex_);
    const std::string uid = kube::uidOf(dataset);
    for (auto it = ensured_.lower_bound(uid); it != ensured_.end() && it->first.starts_with(uid);)
      it = ensured_.erase(it);
  }
  auto updated =
      manager_.client().update(kube::resources::datasets(), withFinalizer(dataset, false));
  if (!updated.isOk() && updated.status().code() != StatusCode::kNotFound) return updated.status();
  log().info("purged", {{"dataset", kube::objectKey(dataset)}});
  return kube::ReconcileResult{};
}

}  // namespace granary::op
