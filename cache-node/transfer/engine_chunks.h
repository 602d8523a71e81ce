// The data plane's ChunkSource over the node's engine: a request names a dataset generation the
// engine holds, and the chunk comes as DatasetCache::openChunkForPeer gives it (a fill when asked).
#pragma once

#include "cache-node/transfer/transfer_server.h"
#include "engine/engine.h"

namespace granary::cache::transfer {

class EngineChunks final : public ChunkSource {
 public:
  explicit EngineChunks(CacheEngine& engine) : engine_(engine) {}

  Result<PeerChunk> open(const ChunkRequest& request) override {
    const DatasetKey key{.ns = request.ns,
                         .name = request.name,
                         .generation = request.generation,
                         .uid = request.uid};
    GRANARY_ASSIGN_OR_RETURN(const auto cache, engine_.find(key));
    return cache->openChunkForPeer(request.path, request.index, request.etag, request.fill);
  }

 private:
  CacheEngine& engine_;
};

}  // namespace granary::cache::transfer
