#include "engine/standalone.h"

#include <cstdlib>

#include "common/api/manifest.h"
#include "common/quantity.h"

namespace granary::cache {
namespace {

Secret fromEnvironment(const char* name) {
  const char* value = std::getenv(name);
  return Secret(value == nullptr ? "" : value);
}

}  // namespace

Result<std::vector<api::Dataset>> loadDatasets(const std::filesystem::path& path) {
  GRANARY_ASSIGN_OR_RETURN(auto documents, api::loadManifests(path));
  std::vector<api::Dataset> datasets;
  for (auto& document : documents) {
    auto* dataset = std::get_if<api::Dataset>(&document.object);
    if (!dataset) continue;
    if (dataset->spec.reference) {
      return invalidArgument(path.string() + ": Dataset " + dataset->metadata.name +
                             ": spec.source.uri: a dataset:// reference is served by "
                             "granary-operator in a cluster; here, name the origin itself "
                             "(s3://, http(s):// or file://)");
    }
    datasets.push_back(std::move(*dataset));
  }
  if (datasets.empty()) return invalidArgument(path.string() + ": holds no Dataset");
  return datasets;
}

SourceSpec localSourceSpec(const api::Source& source) {
  SourceSpec spec{.uri = source.uri,
                  .endpoint = source.endpoint,
                  .region = source.region,
                  .options = source.options};
  if (source.secretRef) {
    spec.accessKeyId = fromEnvironment("AWS_ACCESS_KEY_ID");
    spec.secretAccessKey = fromEnvironment("AWS_SECRET_ACCESS_KEY");
    spec.sessionToken = fromEnvironment("AWS_SESSION_TOKEN");
    spec.bearerToken = fromEnvironment("GRANARY_BEARER_TOKEN");
  }
  return spec;
}

EnsureSpec standaloneSpec(const api::Dataset& dataset) {
  EnsureSpec spec;
  spec.key = {dataset.metadata.namespace_.empty() ? "default" : dataset.metadata.namespace_,
              dataset.metadata.name, std::max<int64_t>(dataset.metadata.generation, 1),
              dataset.metadata.uid.empty() ? "local" : dataset.metadata.uid};
  for (const auto& mount : dataset.spec.mounts)
    spec.mounts.push_back({mount.name, localSourceSpec(mount.source)});
  const api::CacheSpec& cache = dataset.spec.cache;
  DatasetSettings& settings = spec.settings;
  settings.replicas = 1;  // one node
  settings.capacityBytes = cache.capacityPerNode ? cache.capacityPerNode->bytes : 0;
  settings.chunkSize = cache.chunkSize.bytes;
  settings.eviction = cache.policy == api::EvictionPolicy::kLru ? Eviction::kLru : Eviction::kPin;
  // Standalone, nothing else would start an OnJob warm: warm unless told Never.
  settings.warm = cache.warm == api::WarmPolicy::kNever ? WarmMode::kNever : WarmMode::kOnCreate;
  settings.bandwidthLimit = cache.bandwidthLimit ? cache.bandwidthLimit->bytes : 0;
  settings.warmConcurrency = 0;
  return spec;
}

std::vector<std::filesystem::path> fileSourcesOf(const std::vector<api::Dataset>& datasets) {
  std::vector<std::filesystem::path> out;
  for (const auto& dataset : datasets)
    for (const auto& mount : dataset.spec.mounts)
      if (mount.source.uri.starts_with("file:///")) out.emplace_back(mount.source.uri.substr(7));
  return out;
}

std::string progressLine(const DatasetKey& key, const DatasetState& state) {
  const WarmProgress& p = state.progress;
  std::string line =
      key.label() + " " + std::string(phaseName(state.phase)) + " " +
      std::to_string(p.cachedFiles) + "/" + std::to_string(p.ownedFiles) + " files " +
      formatByteSize(ByteSize{p.cachedBytes}) + "/" + formatByteSize(ByteSize{p.ownedBytes}) +
      (p.ownedBytes > 0 ? " (" + std::to_string(p.cachedBytes * 100 / p.ownedBytes) + "%)" : "");
  if (p.bytesPerSecond > 0)
    line += " " + formatByteSize(ByteSize{static_cast<int64_t>(p.bytesPerSecond)}) + "/s";
  // Only a dataset still warming has an ETA, and only once its rate is known.
  if (state.phase == Phase::kWarming && p.bytesPerSecond > 0 && p.etaSeconds > 0)
    line += " ETA " + std::to_string(p.etaSeconds) + "s";
  if (!state.message.empty()) line += " (" + state.message + ")";
  return line;
}

}  // namespace granary::cache
