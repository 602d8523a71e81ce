// The gRPC side of peer transfer: reads chunks from other cache nodes (PeerReader), and sends
// them the jobs' checkpoint files (checkpoint_peers.h).
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/grpc_status.h"
#include "common/secret.h"
#include "common/thread_annotations.h"
#include "engine/checkpoint/origin_writer.h"
#include "engine/dataset_cache.h"
#include "granary/v1/peer.pb.h"

namespace granary::cache {

struct PeerClientOptions {
  Secret token;                       // sent as "authorization: Bearer <token>"
  std::string tlsCaFile;              // PEM of the CA that signed the peers' certificates; "" plain
  std::chrono::seconds timeout{120};  // per chunk
};

// How checkpoint files travel to and from another node (checkpoint_peers.h): over the Peer
// service (GrpcPeers), or the data plane where the node has one (transfer/transfer_peers.h).
class CheckpointFileMover {
 public:
  virtual ~CheckpointFileMover() = default;
  // Puts the `size` bytes of `fd` into `node`'s tree as `header` describes, each piece paced by
  // `pace` (false cancels; pace(0) after the last: whether the file is unchanged).
  virtual Status putCheckpointFile(const std::string& node, const v1::CheckpointFilePiece& header,
                                   int fd, int64_t size,
                                   const checkpoint::OriginWriter::Pace& pace) = 0;
  // Writes the file `request` names, from `node`'s tree, to `fd` from offset 0, telling
  // `arrived` of each piece; Corruption when it fails the sender's checksum.
  virtual Status readCheckpointFile(const std::string& node,
                                    const v1::ReadCheckpointFileRequest& request, int fd,
                                    const std::function<void(int64_t)>& arrived) = 0;
};

class GrpcPeers final : public PeerReader, public CheckpointFileMover {
 public:
  // Reads the CA file (if any) once, here.
  explicit GrpcPeers(PeerClientOptions options);
  ~GrpcPeers() override;

  // Where `node` serves (host:port); replaces what was known.
  void setAddress(const std::string& node, const std::string& address);
  // The address last set for `node`; nullopt when none was.
  std::optional<std::string> addressOf(const std::string& node) GRANARY_EXCLUDES(mutex_);
  // The port of `node`'s data plane (Peer.DescribeTransfer): 0 when it has none, or is a version
  // without the call. Unavailable when it cannot be asked.
  Result<int> describeTransfer(const std::string& node);

  // Streams the chunk and checks it against the XXH3 the peer sends (Corruption on mismatch).
  // Unavailable for a node whose address is unknown.
  Result<std::string> readChunk(const std::string& node, const DatasetKey& dataset,
                                const std::string& path, int64_t index, const std::string& etag,
                                bool fill, int64_t length, std::stop_token stop,
                                std::string buffer) override;
  // No deadline: the lister sends a page at least every second while its listing goes on, and
  // keepalive pings find a peer that stopped answering.
  Result<ManifestTotals> followListing(
      const std::string& node, const DatasetKey& dataset, std::span<const KeyRange> share,
      std::stop_token stop,
      const std::function<Status(std::span<const ManifestEntry>)>& each) override;

  // Streams the `size` bytes of `fd` after `header` (PutCheckpointFile), each piece paced by
  // `pace` (false cancels the call), and the XXH3 of them all on the last. No deadline but the
  // keepalive's: a copy takes as long as its size needs.
  Status putCheckpointFile(const std::string& node, const v1::CheckpointFilePiece& header, int fd,
                           int64_t size, const checkpoint::OriginWriter::Pace& pace) override;
  Status updateCheckpointCopies(const std::string& node,
                                const v1::UpdateCheckpointCopiesRequest& request);
  // A restore's reads of another node's tree: its files, and one of them written to `fd` from
  // offset 0, checked against the XXH3 the last piece carries (Corruption on mismatch).
  Result<v1::CheckpointFileList> listCheckpointFiles(const std::string& node,
                                                     const v1::CheckpointVolumeRef& volume);
  Status readCheckpointFile(const std::string& node, const v1::ReadCheckpointFileRequest& request,
                            int fd, const std::function<void(int64_t)>& arrived) override;

 private:
  struct Connection;  // a channel and its stub, reused by every call to one address
  std::shared_ptr<Connection> connectionTo(const std::string& node);
  // The connection to `node` for a call in `context`, which carries the token from here on.
  // Unavailable when the node's address is unknown.
  Result<std::shared_ptr<Connection>> callTo(const std::string& node, grpc::ClientContext& context);

  PeerClientOptions options_;
  std::string caPem_;
  Mutex mutex_;
  std::map<std::string, std::string> addresses_ GRANARY_GUARDED_BY(mutex_);
  // By address.
  std::map<std::string, std::shared_ptr<Connection>> connections_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::cache
