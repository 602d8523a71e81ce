#include "operator/core/cache_generation.h"

#include <algorithm>
#include <cstdio>

namespace granary::op {

using kube::Json;

namespace {

// FNV-1a, 64 bits: stable across builds, unlike std::hash.
std::string digestOf(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (const unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

}  // namespace

CacheGeneration cacheGenerationOf(const Json& dataset) {
  Json spec = kube::pathValue(dataset, "spec");
  if (spec.is_object() && spec.has_field("sharing")) spec.erase("sharing");
  CacheGeneration cache{kube::generationOf(dataset), digestOf(spec.serialize())};
  const Json generation = kube::pathValue(dataset, "status.cacheGeneration");
  const Json digest = kube::pathValue(dataset, "status.cacheDigest");
  if (!generation.is_integer()) return cache;
  const int64_t held = generation.as_number().to_int64();
  if (digest.is_string() && digest.as_string() == cache.digest) {
    cache.generation = held;
    return cache;
  }
  // A new cache: above every version made or being made, which refreshes number past
  // metadata.generation.
  const Json refreshing = kube::pathValue(dataset, "status.refresh.nextVersion");
  cache.generation =
      std::max({cache.generation, held + 1,
                refreshing.is_integer() ? refreshing.as_number().to_int64() + 1 : int64_t{0}});
  return cache;
}

Json withCacheGeneration(Json status, const CacheGeneration& cache) {
  if (!status.is_object()) return status;
  status["cacheGeneration"] = Json::number(cache.generation);
  status["cacheDigest"] = Json::string(cache.digest);
  return status;
}

}  // namespace granary::op
