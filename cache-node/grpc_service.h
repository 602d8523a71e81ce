// The cache node's gRPC server: the CacheNode API (operator, granaryctl, tests) and the Peer
// API (other cache nodes), both over one port, both refusing calls without the shared bearer
// token (UNAUTHENTICATED). TLS when a certificate and key are given.
#pragma once

#include <memory>
#include <string>

#include "cache-node/checkpoint_peers.h"
#include "cache-node/csi/checkpoint_volumes.h"
#include "cache-node/csi/cut_off_readers.h"
#include "cache-node/csi/generation_readers.h"
#include "cache-node/ensured_record.h"
#include "cache-node/grpc_peers.h"
#include "common/names.h"
#include "common/secret.h"
#include "engine/engine.h"
#include "engine/gpu/gpu_sampler.h"
#include "engine/mount/reader_accounting.h"

namespace grpc {
class Server;
}

namespace granary::cache {

struct ServerOptions {
  std::string address = names::anyAddress(
      names::kCacheNodeGrpcPort);  // port 0 picks a free one (see CacheNodeServer::port)
  Secret token;                    // the shared bearer token; required
  std::string tlsCertificateFile;  // PEM; with tlsKeyFile, serves TLS
  std::string tlsKeyFile;
  ReaderAccounting* readers = nullptr;    // who reads through mounts, for GetTelemetry
  GpuSampler* gpus = nullptr;             // the node's GPUs, for GetTelemetry
  EnsuredRecord* ensured = nullptr;       // records what EnsureDataset and PurgeDataset change
  const CutOffReaders* cutOff = nullptr;  // pods whose views ended, in each dataset's status
  // The pods bound to each generation, in each generation's status.
  const GenerationReaders* generationReaders = nullptr;
  // The jobs' checkpoint volumes, for GetTelemetry and the copies other nodes put here.
  CheckpointVolumes* checkpoints = nullptr;
  CheckpointPeers* checkpointPeers = nullptr;  // with checkpoints: SetCheckpointPeers
  // The port of this node's data plane (cache-node/transfer/), told to peers that ask
  // (DescribeTransfer); 0: none, they read chunks over ReadChunk.
  int transferPort = 0;
};

// What EnsureDataset does with a request: the view, or the dataset generation (its node set's
// addresses told to `peers`). Errors name the request's field at fault.
Result<std::shared_ptr<DatasetCache>> ensureRequested(CacheEngine& engine, GrpcPeers& peers,
                                                      const v1::EnsureDatasetRequest& request);

class CacheNodeServer {
 public:
  // `peers` learns the addresses of each dataset's node set from EnsureDataset. Unavailable
  // when the address cannot be bound; InvalidArgument for a missing token or half a TLS pair.
  static Result<std::unique_ptr<CacheNodeServer>> start(CacheEngine& engine, GrpcPeers& peers,
                                                        ServerOptions options);
  ~CacheNodeServer();  // stops serving; streams in flight are cancelled within a second

  int port() const { return port_; }

  struct Services;

 private:
  CacheNodeServer() = default;
  std::unique_ptr<Services> services_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace granary::cache
