// The generation the cache nodes hold a Dataset under. Any change of spec is a new
// metadata.generation, but only a change of what is cached (its sources and spec.cache) is a new
// cache: changing spec.sharing (who may refer to it) reads and caches nothing again. status
// keeps the cache's generation and a digest of the spec it was made from. Pure.
#pragma once

#include <cstdint>
#include <string>

#include "common/kube/object.h"

namespace granary::op {

struct CacheGeneration {
  int64_t generation = 0;
  std::string digest;  // of spec without sharing
};

// status.cacheGeneration when status.cacheDigest matches the spec's (a refresh that found the
// origin changed sets it to the version it made); else a new generation: metadata.generation,
// or above every version a refresh made or is making (status.refresh.nextVersion), if higher.
CacheGeneration cacheGenerationOf(const kube::Json& dataset);

// `status` recording `cache` (status.cacheGeneration and status.cacheDigest).
kube::Json withCacheGeneration(kube::Json status, const CacheGeneration& cache);

}  // namespace granary::op
