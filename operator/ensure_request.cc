#include "operator/ensure_request.h"

#include <cpprest/asyncrt_utils.h>

namespace granary::op {

std::string inSpecTerms(const std::string& rejection, const api::Dataset& dataset) {
  const size_t at = rejection.find("mounts[");  // after the node's "cache node <address>: "
  if (at == std::string::npos || (at > 0 && rejection[at - 1] != ' ')) return rejection;
  const size_t close = rejection.find("].", at);
  if (close == std::string::npos) return rejection;
  const std::string said = rejection.substr(0, at);
  const std::string field = rejection.substr(close + 2);  // e.g. "source.uri: ..."
  // A Dataset with `source` has one mount without a name; named mounts come from `mounts`.
  const bool oneSource = dataset.spec.mounts.size() == 1 && dataset.spec.mounts[0].name.empty();
  if (oneSource && field.starts_with("source.")) return said + "spec." + field;
  return said + "spec." + rejection.substr(at);
}

v1::DatasetRef refOf(const api::ObjectMeta& metadata) {
  v1::DatasetRef ref;
  ref.set_namespace_(metadata.namespace_);
  ref.set_name(metadata.name);
  ref.set_generation(metadata.generation);
  ref.set_uid(metadata.uid);
  return ref;
}

v1::SetWarmPlanRequest warmPlanRequestOf(const v1::DatasetRef& dataset,
                                         const std::vector<DatasetReader>& readers) {
  v1::SetWarmPlanRequest request;
  *request.mutable_dataset() = dataset;
  request.set_priority(warmPriorityOf(readers));
  request.set_access_order_file(accessOrderFileOf(readers));
  for (const auto& r : readers) {
    v1::Reader& reader = *request.add_readers();
    reader.set_pod_namespace(r.podNamespace);
    reader.set_pod_name(r.podName);
    reader.set_pod_uid(r.podUid);
    reader.set_node_name(r.node);
    reader.set_rank(r.rank);
  }
  return request;
}

v1::EnsureDatasetRequest ensureRequestOf(
    const api::Dataset& dataset, const std::map<std::string, OriginCredentials>& credentials,
    const NodeSetPlan& plan) {
  v1::EnsureDatasetRequest request;
  *request.mutable_dataset() = refOf(dataset.metadata);
  for (const auto& mount : dataset.spec.mounts) {
    auto* m = request.add_mounts();
    m->set_name(mount.name);
    auto* source = m->mutable_source();
    source->set_uri(mount.source.uri);
    source->set_endpoint(mount.source.endpoint);
    source->set_region(mount.source.region);
    for (const auto& [key, value] : mount.source.options) (*source->mutable_options())[key] = value;
    if (auto it = credentials.find(mount.name); it != credentials.end()) {
      auto* c = m->mutable_credentials();
      c->set_access_key_id(it->second.accessKeyId.reveal());
      c->set_secret_access_key(it->second.secretAccessKey.reveal());
      c->set_session_token(it->second.sessionToken.reveal());
      c->set_bearer_token(it->second.token.reveal());
    }
  }
  const api::CacheSpec& cache = dataset.spec.cache;
  auto* c = request.mutable_cache();
  c->set_replicas(static_cast<uint32_t>(cache.replicas));
  c->set_capacity_bytes(cache.capacityPerNode ? cache.capacityPerNode->bytes : 0);
  c->set_policy(cache.policy == api::EvictionPolicy::kLru ? v1::EVICTION_POLICY_LRU
                                                          : v1::EVICTION_POLICY_PIN);
  c->set_warm(cache.warm == api::WarmPolicy::kOnJob   ? v1::WARM_MODE_ON_JOB
              : cache.warm == api::WarmPolicy::kNever ? v1::WARM_MODE_NEVER
                                                      : v1::WARM_MODE_ON_CREATE);
  c->set_bandwidth_limit_bytes_per_second(cache.bandwidthLimit ? cache.bandwidthLimit->bytes : 0);
  c->set_chunk_size_bytes(cache.chunkSize.bytes);
  for (const auto& node : plan.nodes) {
    auto* endpoint = request.add_node_set();
    endpoint->set_node_name(node.node.name);
    endpoint->set_address(node.address);
  }
  return request;
}

Result<OriginCredentials> credentialsOf(const kube::Json& secret) {
  const auto value = [&](const char* key) -> std::string {
    const kube::Json data = kube::pathValue(secret, std::string("data.") + key);
    if (data.is_string()) {
      try {
        const auto bytes = utility::conversions::from_base64(data.as_string());
        return std::string(bytes.begin(), bytes.end());
      } catch (const std::exception&) {
        return {};
      }
    }
    const kube::Json plain = kube::pathValue(secret, std::string("stringData.") + key);
    return plain.is_string() ? plain.as_string() : std::string();
  };
  OriginCredentials c{Secret(value("accessKeyId")), Secret(value("secretAccessKey")),
                      Secret(value("sessionToken")), Secret(value("token"))};
  if (c.accessKeyId.empty() && c.secretAccessKey.empty() && c.token.empty()) {
    return invalidArgument("Secret " + kube::nameOf(secret) +
                           ": has none of the keys accessKeyId, secretAccessKey (s3) or token "
                           "(http); add them to its data");
  }
  if (c.accessKeyId.empty() != c.secretAccessKey.empty()) {
    return invalidArgument("Secret " + kube::nameOf(secret) +
                           ": accessKeyId and secretAccessKey go together; add the missing one");
  }
  return c;
}

}  // namespace granary::op
