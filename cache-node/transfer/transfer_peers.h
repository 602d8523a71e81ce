// The PeerReader and CheckpointFileMover of a cache node: chunks and checkpoint files over each
// peer's data plane (transfer_client.h) where the peer has one, over the Peer service where it
// has none (TLS on, the plane switched off, a version without it) or cannot be reached on it;
// listings and checkpoint news always over the Peer service (small messages, not bulk bytes). Which
// port a peer's plane has is asked once over gRPC (DescribeTransfer) and asked again after its
// address changes or a connection to it fails.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "cache-node/grpc_peers.h"
#include "cache-node/transfer/transfer_client.h"
#include "common/thread_annotations.h"

namespace granary::cache::transfer {

class TransferPeers final : public PeerReader, public CheckpointFileMover {
 public:
  // `grpc` and `client` outlive this; `client` null: every chunk over gRPC.
  TransferPeers(GrpcPeers& grpc, TransferClient* client) : grpc_(grpc), client_(client) {}

  Result<std::string> readChunk(const std::string& node, const DatasetKey& dataset,
                                const std::string& path, int64_t index, const std::string& etag,
                                bool fill, int64_t length, std::stop_token stop,
                                std::string buffer) override;
  Result<ManifestTotals> followListing(
      const std::string& node, const DatasetKey& dataset, std::span<const KeyRange> share,
      std::stop_token stop,
      const std::function<Status(std::span<const ManifestEntry>)>& each) override {
    return grpc_.followListing(node, dataset, share, stop, each);
  }
  Status putCheckpointFile(const std::string& node, const v1::CheckpointFilePiece& header, int fd,
                           int64_t size, const checkpoint::OriginWriter::Pace& pace) override;
  Status readCheckpointFile(const std::string& node, const v1::ReadCheckpointFileRequest& request,
                            int fd, const std::function<void(int64_t)>& arrived) override;

 private:
  struct Plane {
    std::string grpcAddress;                             // the address it was asked at
    int port = 0;                                        // 0: none
    std::chrono::steady_clock::time_point askAgainAt{};  // while port is 0
  };
  // `node`'s plane, asked over gRPC when not known for its current address; nullopt: none.
  std::optional<Endpoint> planeOf(const std::string& node) GRANARY_EXCLUDES(mutex_);
  // A connection to `node`'s plane failed: its chunks go over gRPC for a while, then it is asked
  // again (it may have restarted on another port).
  void planeFailed(const std::string& node) GRANARY_EXCLUDES(mutex_);
  // A node that stalled or left in the middle of a chunk (a stopped process, a partition) is
  // passed over for a while: its chunks come from the next owner or the origin at once.
  void passOver(const std::string& node) GRANARY_EXCLUDES(mutex_);
  bool passedOver(const std::string& node) GRANARY_EXCLUDES(mutex_);

  GrpcPeers& grpc_;
  TransferClient* const client_;
  Mutex mutex_;
  std::map<std::string, Plane> planes_ GRANARY_GUARDED_BY(mutex_);  // by node
  std::map<std::string, std::chrono::steady_clock::time_point> passedOver_
      GRANARY_GUARDED_BY(mutex_);  // by node: until when
};

}  // namespace granary::cache::transfer
