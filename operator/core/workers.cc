#include "operator/core/workers.h"

#include <algorithm>
#include <set>

#include "common/names.h"
#include "operator/core/readers.h"

namespace granary::op {

using kube::Json;

namespace {

Json ownerReference(const Json& job) {
  Json owner = Json::object();
  owner["apiVersion"] = Json::string(names::kGroupVersion);
  owner["kind"] = Json::string(names::kTrainingJobKind);
  owner["name"] = Json::string(kube::nameOf(job));
  owner["uid"] = Json::string(kube::uidOf(job));
  owner["controller"] = Json::boolean(true);
  owner["blockOwnerDeletion"] = Json::boolean(true);
  Json list = Json::array();
  list[0] = std::move(owner);
  return list;
}

Json envVar(const std::string& name, const std::string& value) {
  Json e = Json::object();
  e["name"] = Json::string(name);
  e["value"] = Json::string(value);
  return e;
}

// Appends `add` to the array at `field` of `object`, skipping entries whose "name" (or
// "mountPath" for mounts) the user already set: the template wins.
void appendNamed(Json& object, const std::string& field, const Json& add, const char* key) {
  Json list = object.has_array_field(field) ? object.at(field) : Json::array();
  std::set<std::string> taken;
  for (const auto& item : list.as_array())
    if (item.has_string_field(key)) taken.insert(item.at(key).as_string());
  for (const auto& item : add.as_array())
    if (!taken.count(item.at(key).as_string())) list[list.size()] = item;
  object[field] = std::move(list);
}

std::string volumeName(const std::string& dataset) { return "dataset-" + dataset; }
constexpr const char* kCheckpointVolumeName = "granary-checkpoints";

// The job's checkpoint volume: the cache node restores it from the origin, binds it read-write
// and drains it back (cache-node/csi/checkpoint_volumes.h).
Json checkpointVolume(const api::CheckpointVolume& checkpoints, const std::string& peers) {
  const api::Source& source = checkpoints.source;
  Json attributes = Json::object();
  attributes[names::kCsiCheckpointsAttribute] = Json::string(source.uri);
  if (!source.endpoint.empty())
    attributes[names::kCsiEndpointAttribute] = Json::string(source.endpoint);
  if (!source.region.empty()) attributes[names::kCsiRegionAttribute] = Json::string(source.region);
  if (checkpoints.bandwidthLimit)
    attributes[names::kCsiBandwidthLimitAttribute] =
        Json::string(std::to_string(checkpoints.bandwidthLimit->bytes));
  for (const auto& [key, value] : source.options)
    attributes[names::kCsiOptionAttributePrefix + key] = Json::string(value);
  if (!peers.empty()) attributes[names::kCsiCheckpointPeersAttribute] = Json::string(peers);
  Json v = Json::object();
  v["name"] = Json::string(kCheckpointVolumeName);
  v["csi"]["driver"] = Json::string(names::kCsiDriver);
  v["csi"]["volumeAttributes"] = std::move(attributes);
  if (source.secretRef)
    v["csi"]["nodePublishSecretRef"]["name"] = Json::string(source.secretRef->name);
  return v;
}

}  // namespace

std::string masterAddress(const std::string& job, const std::string& ns) {
  return workerName(job, 0) + "." + job + "." + ns + ".svc";
}

Json workerPod(const Json& job, const api::TrainingJobSpec& spec, int rank, int attempt,
               const Json& versions, const std::string& checkpointPeers) {
  const std::string name = kube::nameOf(job), ns = kube::namespaceOf(job);
  const Json tmpl = kube::pathValue(job, "spec.template");
  Json pod = Json::object();
  pod["apiVersion"] = Json::string("v1");
  pod["kind"] = Json::string("Pod");
  Json metadata = tmpl.has_object_field("metadata") ? tmpl.at("metadata") : Json::object();
  metadata["name"] = Json::string(workerName(name, rank));
  metadata["namespace"] = Json::string(ns);
  if (!metadata.has_object_field("labels")) metadata["labels"] = Json::object();
  metadata["labels"][names::kJobNameLabel] = Json::string(name);
  metadata["labels"][names::kRankLabel] = Json::string(std::to_string(rank));
  metadata["labels"][names::kAttemptLabel] = Json::string(std::to_string(attempt));
  if (rank >= spec.workers) metadata["labels"][names::kSurplusLabel] = Json::string("true");
  if (spec.warmPolicy == api::WarmStart::kNone)
    metadata["labels"][names::kWarmLabel] = Json::string("false");
  metadata["ownerReferences"] = ownerReference(job);
  Json hints = Json::object();
  for (const auto& d : spec.datasets)
    if (!d.accessOrderFile.empty()) hints[d.name] = Json::string(d.accessOrderFile);
  if (hints.size() > 0) {
    if (!metadata.has_object_field("annotations")) metadata["annotations"] = Json::object();
    metadata["annotations"][names::kAccessOrderFilesAnnotation] = Json::string(hints.serialize());
  }
  pod["metadata"] = std::move(metadata);

  Json podSpec = tmpl.at("spec");
  podSpec["restartPolicy"] = Json::string("Never");
  if (!podSpec.has_string_field("schedulerName"))
    podSpec["schedulerName"] = Json::string(spec.scheduling.schedulerName);
  if (!spec.scheduling.priorityClassName.empty() && !podSpec.has_string_field("priorityClassName"))
    podSpec["priorityClassName"] = Json::string(spec.scheduling.priorityClassName);
  podSpec["hostname"] = Json::string(workerName(name, rank));
  podSpec["subdomain"] = Json::string(name);

  Json env = Json::array();
  const api::Rendezvous meet = spec.elastic
                                   ? elasticRendezvous(job, attempt)
                                   : api::Rendezvous{.masterAddress = masterAddress(name, ns),
                                                     .masterPort = spec.masterPort};
  for (const auto& [key, value] : api::workerEnvironment(spec, rank, meet))
    env[env.size()] = envVar(key, value);
  Json mounts = Json::array();
  Json volumes = Json::array();
  for (const auto& d : spec.datasets) {
    Json m = Json::object();
    m["name"] = Json::string(volumeName(d.name));
    m["mountPath"] = Json::string(d.mountPath);
    m["readOnly"] = Json::boolean(true);
    mounts[mounts.size()] = std::move(m);
    Json v = Json::object();
    v["name"] = Json::string(volumeName(d.name));
    v["csi"]["driver"] = Json::string(names::kCsiDriver);
    v["csi"]["readOnly"] = Json::boolean(true);
    v["csi"]["volumeAttributes"][names::kCsiDatasetAttribute] = Json::string(d.name);
    if (versions.is_object() && versions.has_integer_field(d.name)) {
      v["csi"]["volumeAttributes"][names::kCsiVersionAttribute] =
          Json::string(std::to_string(versions.at(d.name).as_number().to_int64()));
    }
    if (spec.warmPolicy == api::WarmStart::kBeforeStart)
      v["csi"]["volumeAttributes"][names::kCsiWarmFirstAttribute] = Json::string("true");
    volumes[volumes.size()] = std::move(v);
  }
  if (spec.checkpoints) {
    Json m = Json::object();
    m["name"] = Json::string(kCheckpointVolumeName);
    m["mountPath"] = Json::string(spec.checkpoints->mountPath);
    mounts[mounts.size()] = std::move(m);
    volumes[volumes.size()] = checkpointVolume(*spec.checkpoints, checkpointPeers);
  }
  appendNamed(podSpec, "volumes", volumes, "name");
  Json& containers = podSpec["containers"];
  for (size_t i = 0; i < containers.size(); ++i) {
    Json& c = containers[i];
    appendNamed(c, "env", env, "name");
    appendNamed(c, "volumeMounts", mounts, "mountPath");
    if (i == 0 && spec.gpusPerWorker > 0) {
      const Json gpus = Json::string(std::to_string(spec.gpusPerWorker));
      c["resources"]["limits"]["nvidia.com/gpu"] = gpus;
      c["resources"]["requests"]["nvidia.com/gpu"] = gpus;
    }
  }
  if (rank > 0 && !spec.elastic) {
    // Workers must not race rank 0's DNS record (torchrun fails on an unknown host).
    Json wait = Json::object();
    wait["name"] = Json::string("wait-for-rank-0");
    wait["image"] = containers[0].at("image");
    wait["command"][0] = Json::string("sh");
    wait["command"][1] = Json::string("-c");
    wait["command"][2] = Json::string(
        "until getent hosts \"$MASTER_ADDR\" >/dev/null 2>&1 || nslookup \"$MASTER_ADDR\" "
        ">/dev/null 2>&1; do echo waiting for $MASTER_ADDR; sleep 1; done");
    wait["env"][0] = envVar("MASTER_ADDR", masterAddress(name, ns));
    Json init =
        podSpec.has_array_field("initContainers") ? podSpec.at("initContainers") : Json::array();
    Json ordered = Json::array();
    ordered[0] = std::move(wait);
    for (const auto& c : init.as_array()) ordered[ordered.size()] = c;
    podSpec["initContainers"] = std::move(ordered);
  }
  pod["spec"] = std::move(podSpec);
  return pod;
}

std::string rendezvousName(const std::string& job) { return job + "-rendezvous"; }

api::Rendezvous elasticRendezvous(const Json& job, int attempt) {
  const std::string name = kube::nameOf(job), ns = kube::namespaceOf(job);
  return {
      .endpoint = rendezvousName(name) + "." + ns + ".svc:" + std::to_string(api::kRendezvousPort),
      .id = kube::uidOf(job) + "-" + std::to_string(attempt)};
}

Json rendezvousPod(const Json& job) {
  const std::string name = kube::nameOf(job);
  Json pod = Json::object();
  pod["apiVersion"] = Json::string("v1");
  pod["kind"] = Json::string("Pod");
  pod["metadata"]["name"] = Json::string(rendezvousName(name));
  pod["metadata"]["namespace"] = Json::string(kube::namespaceOf(job));
  pod["metadata"]["labels"][names::kRendezvousLabel] = Json::string(name);
  pod["metadata"]["ownerReferences"] = ownerReference(job);
  Json container = Json::object();
  container["name"] = Json::string("rendezvous");
  container["image"] = kube::pathValue(job, "spec.template.spec.containers").at(0).at("image");
  Json command = Json::array();
  for (const auto& arg :
       api::rendezvousStoreCommand(api::kRendezvousPort, api::kRendezvousNoticePort))
    command[command.size()] = Json::string(arg);
  container["command"] = std::move(command);
  Json token = Json::object();
  token["name"] = Json::string(api::kRendezvousTokenEnv);
  token["valueFrom"]["secretKeyRef"]["name"] = Json::string(rendezvousName(name));
  token["valueFrom"]["secretKeyRef"]["key"] = Json::string(kRendezvousTokenKey);
  container["env"][0] = std::move(token);
  container["ports"][0]["containerPort"] = Json::number(api::kRendezvousPort);
  container["ports"][1]["containerPort"] = Json::number(api::kRendezvousNoticePort);
  pod["spec"]["containers"][0] = std::move(container);
  pod["spec"]["restartPolicy"] = Json::string("Always");
  return pod;
}

Json rendezvousSecret(const Json& job, const std::string& token) {
  const std::string name = kube::nameOf(job);
  Json secret = Json::object();
  secret["apiVersion"] = Json::string("v1");
  secret["kind"] = Json::string("Secret");
  secret["metadata"]["name"] = Json::string(rendezvousName(name));
  secret["metadata"]["namespace"] = Json::string(kube::namespaceOf(job));
  secret["metadata"]["labels"][names::kRendezvousLabel] = Json::string(name);
  secret["metadata"]["ownerReferences"] = ownerReference(job);
  secret["type"] = Json::string("Opaque");
  secret["stringData"][kRendezvousTokenKey] = Json::string(token);
  return secret;
}

Json rendezvousService(const Json& job) {
  const std::string name = kube::nameOf(job);
  Json service = Json::object();
  service["apiVersion"] = Json::string("v1");
  service["kind"] = Json::string("Service");
  service["metadata"]["name"] = Json::string(rendezvousName(name));
  service["metadata"]["namespace"] = Json::string(kube::namespaceOf(job));
  service["metadata"]["ownerReferences"] = ownerReference(job);
  service["spec"]["selector"][names::kRendezvousLabel] = Json::string(name);
  Json port = Json::object();
  port["name"] = Json::string("rendezvous");
  port["port"] = Json::number(api::kRendezvousPort);
  service["spec"]["ports"][0] = std::move(port);
  Json notices = Json::object();
  notices["name"] = Json::string("notices");
  notices["port"] = Json::number(api::kRendezvousNoticePort);
  service["spec"]["ports"][1] = std::move(notices);
  return service;
}

Json headlessService(const Json& job, const api::TrainingJobSpec& spec) {
  const std::string name = kube::nameOf(job);
  Json service = Json::object();
  service["apiVersion"] = Json::string("v1");
  service["kind"] = Json::string("Service");
  service["metadata"]["name"] = Json::string(name);
  service["metadata"]["namespace"] = Json::string(kube::namespaceOf(job));
  service["metadata"]["labels"][names::kJobNameLabel] = Json::string(name);
  service["metadata"]["ownerReferences"] = ownerReference(job);
  service["spec"]["clusterIP"] = Json::string("None");
  service["spec"]["publishNotReadyAddresses"] = Json::boolean(true);
  service["spec"]["selector"][names::kJobNameLabel] = Json::string(name);
  Json port = Json::object();
  port["name"] = Json::string("master");
  port["port"] = Json::number(spec.masterPort);
  service["spec"]["ports"][0] = std::move(port);
  return service;
}

}  // namespace granary::op
