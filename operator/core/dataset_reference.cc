#include "operator/core/dataset_reference.h"

#include <algorithm>

#include "common/kube/yaml_json.h"
#include "operator/core/conditions.h"

namespace granary::op {

using kube::Json;

namespace {

// The figures a reference shows: its source's, which are its own bytes too.
constexpr const char* kMirrored[] = {"phase",       "totalBytes",  "totalSize",        "totalFiles",
                                     "cachedBytes", "cachedFiles", "cachedPercentage", "warm",
                                     "nodes",       "version",     "versionTime"};

bool isRefusal(const std::string& reason) {
  for (const char* refusal :
       {kSourceNotFound, kSourceIsReference, kSourceInvalid, kNotOffered, kOfferWithdrawn})
    if (reason == refusal) return true;
  return false;
}

// A status with no figures: a refused reference is on no node.
Json refusedStatus(const ReferenceObservation& o, api::DatasetPhase phase,
                   const std::string& reason, const std::string& message) {
  Json bare = Json::object();
  bare["conditions"] = kube::pathValue(o.previousStatus, "conditions");
  return problemStatus(bare, o.generation, phase, reason, message, o.now);
}

Json servedStatus(const ReferenceObservation& o) {
  const Json source = kube::pathValue(*o.source, "status");
  Json status = Json::object();
  for (const char* field : kMirrored)
    if (source.has_field(field)) status[field] = source.at(field);
  if (!status.has_field("phase")) status["phase"] = Json::string("Pending");
  status["observedGeneration"] = Json::number(o.generation);
  Condition ready = conditionOf(source, "Ready");
  const std::string from = "Dataset " + o.reference.key();
  if (!phaseOfStatus(source))
    ready = {"Ready", false, "Pending", "no status yet; it is being planned"};
  ready.message = from + ": " + ready.message;
  Json conditions = kube::pathValue(o.previousStatus, "conditions");
  setCondition(conditions, ready, o.generation, o.now);
  status["conditions"] = std::move(conditions);
  return status;
}

}  // namespace

Result<api::Dataset> decodeDataset(const Json& object) {
  Json parts = Json::object();
  parts["metadata"] = kube::pathValue(object, "metadata");
  parts["spec"] = kube::pathValue(object, "spec");
  const config::Node root = kube::toConfig(parts);
  api::Dataset dataset;
  if (const config::Node* metadata = root.find("metadata"); metadata && !metadata->isNull())
    GRANARY_RETURN_IF_ERROR(decodeValue(*metadata, dataset.metadata));
  const config::Node* spec = root.find("spec");
  if (spec == nullptr || spec->isNull()) return invalidArgument("spec: required; name a source");
  GRANARY_RETURN_IF_ERROR(decodeValue(*spec, dataset.spec));
  if (dataset.metadata.generation == 0) dataset.metadata.generation = kube::generationOf(object);
  return dataset;
}

ReferencePlan planReference(const ReferenceObservation& o, const DatasetPlanOptions& options) {
  ReferencePlan plan;
  const std::string source = "spec.source.uri: Dataset " + o.reference.key();
  const auto refuse = [&](api::DatasetPhase phase, const char* reason, const std::string& why) {
    plan.status = refusedStatus(o, phase, reason, why);
  };
  const Result<api::Dataset> decoded =
      o.source ? decodeDataset(*o.source) : Result<api::Dataset>(notFound(""));
  const bool wasServed = phaseOfStatus(o.previousStatus).has_value() &&
                         !isRefusal(conditionOf(o.previousStatus, "Ready").reason);
  const bool withdrawn =
      wasServed || conditionOf(o.previousStatus, "Ready").reason == kOfferWithdrawn;
  if (!o.source) {
    refuse(api::DatasetPhase::kPending, kSourceNotFound,
           source + " does not exist (or is being deleted); create it, or name one that exists");
  } else if (const std::string further = sourceKeyOf(*o.source); !further.empty()) {
    refuse(api::DatasetPhase::kFailed, kSourceIsReference,
           source +
               " refers to another Dataset itself; refer to the Dataset that names the "
               "origin, dataset://" +
               further);
  } else if (!decoded.isOk()) {
    refuse(api::DatasetPhase::kFailed, kSourceInvalid,
           source + " is invalid: " + decoded.status().message());
  } else if (!api::offersTo(decoded->spec, o.ns)) {
    const std::string fix = "its owner lists \"" + o.ns + "\" in spec.sharing.namespaces";
    if (withdrawn) {
      refuse(api::DatasetPhase::kFailed, kOfferWithdrawn,
             source + " is no longer offered to namespace \"" + o.ns +
                 "\": new mounts are refused, pods that mounted it read on until they end; " + fix +
                 " to offer it again");
    } else {
      refuse(api::DatasetPhase::kFailed, kNotOffered,
             source + " is not offered to namespace \"" + o.ns + "\"; " + fix);
    }
  } else {
    plan.serve = true;
    const auto listed = nodesListedIn(kube::pathValue(*o.source, "status"));
    plan.nodes.assign(listed.begin(), listed.end());
    plan.status = servedStatus(o);
  }
  plan.event = datasetEventFor(o.previousStatus, plan.status);
  // A Failed reference waits for its source to change, which wakes it anyway.
  const auto phase = phaseOfStatus(plan.status);
  plan.requeueAfter = phase && (isSettled(*phase) || *phase == api::DatasetPhase::kFailed)
                          ? options.pollReady
                          : options.pollWarming;
  return plan;
}

Json withReferrers(Json status, const std::vector<std::string>& referrers) {
  if (!status.is_object()) return status;
  if (referrers.empty()) {
    if (status.has_field("referredBy")) status.erase("referredBy");
    return status;
  }
  Json list = Json::array();
  for (const auto& r : referrers) list[list.size()] = Json::string(r);
  status["referredBy"] = std::move(list);
  return status;
}

std::string sourceKeyOf(const Json& dataset) {
  const Json uri = kube::pathValue(dataset, "spec.source.uri");
  if (!uri.is_string()) return "";
  const auto reference = api::parseDatasetUri(uri.as_string());
  return reference.isOk() ? reference->key() : "";
}

std::vector<std::string> referrersOffered(const Json& source,
                                          const std::vector<kube::ObjectPtr>& datasets) {
  std::vector<std::string> out;
  if (datasets.empty()) return out;
  const auto spec = decodeDataset(source);
  if (!spec.isOk()) return out;
  for (const auto& d : datasets) {
    const std::string ns = kube::namespaceOf(*d);
    if (api::offersTo(spec->spec, ns)) out.push_back(kube::objectKey(*d));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace granary::op
