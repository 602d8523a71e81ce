// Checkpoint copies between the nodes of a job. Each checkpoint volume this node opens gets a
// VolumePeers: the copy targets (engine/checkpoint/copy_targets.h) the operator sets with
// SetCheckpointPeers, told of news over the Peer service (GrpcPeers), their files moved by a
// CheckpointFileMover (the data plane where a peer has one). The other side, the calls
// other nodes make of this one, places their files into this node's tree of the volume
// (engine/checkpoint/peer_copies.h) and takes their news.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache-node/csi/checkpoint_volumes.h"
#include "cache-node/grpc_peers.h"
#include "common/thread_annotations.h"
#include "engine/checkpoint/copy_targets.h"
#include "granary/v1/cache_node.pb.h"
#include "granary/v1/peer.grpc.pb.h"

namespace granary::cache {

struct PeerNode {
  std::string name;
  std::string address;  // host:port of its Peer service
  friend bool operator==(const PeerNode&, const PeerNode&) = default;
};

// One volume's copy targets. Thread-safe.
class VolumePeers final : public checkpoint::CopyTargets {
 public:
  VolumePeers(GrpcPeers& grpc, CheckpointFileMover& files, std::string self,
              v1::CheckpointVolumeRef volume)
      : grpc_(grpc), files_(files), self_(std::move(self)), volume_(std::move(volume)) {}

  // Replaces the set (a new generation when it changed). The nodes leaving it are told to drop
  // the copies they hold for this node to upload, as far as they can be reached.
  void setPeers(std::vector<PeerNode> peers);

  Set current() const override;
  Status copy(const std::string& path, int fd, const checkpoint::FileIdentity& version,
              bool atOrigin, const checkpoint::OriginWriter::Pace& pace) override;
  Status atOrigin(const std::string& path, const checkpoint::FileIdentity& version) override;
  Status removed(const std::string& path) override;

 private:
  std::vector<std::string> names() const;
  // Sends `request` (its volume and writer filled in here) to each of `nodes`; the first error.
  Status tell(const std::vector<std::string>& nodes, v1::UpdateCheckpointCopiesRequest request);

  GrpcPeers& grpc_;
  CheckpointFileMover& files_;
  const std::string self_;
  const v1::CheckpointVolumeRef volume_;
  mutable Mutex mutex_;
  std::vector<PeerNode> peers_ GRANARY_GUARDED_BY(mutex_);
  uint64_t generation_ GRANARY_GUARDED_BY(mutex_) = 0;
};

// Another node's tree of a volume, for a restore here (engine/checkpoint/restore.h).
class GrpcPeerTree final : public checkpoint::PeerTree {
 public:
  GrpcPeerTree(GrpcPeers& grpc, CheckpointFileMover& files, std::string node,
               v1::CheckpointVolumeRef volume)
      : grpc_(grpc), files_(files), node_(std::move(node)), volume_(std::move(volume)) {}
  const std::string& node() const override { return node_; }
  Result<std::vector<checkpoint::PeerFile>> list() override;
  Status read(const checkpoint::PeerFile& file, int fd,
              const std::function<void(int64_t)>& arrived) override;

 private:
  GrpcPeers& grpc_;
  CheckpointFileMover& files_;
  const std::string node_;
  const v1::CheckpointVolumeRef volume_;
};

// The node's VolumePeers, one per volume it opened, and the Peer and CacheNode calls about
// checkpoint copies. Thread-safe.
class CheckpointPeers {
 public:
  CheckpointPeers(GrpcPeers& grpc, CheckpointFileMover& files, std::string self)
      : grpc_(grpc), files_(files), self_(std::move(self)) {}

  // For CheckpointVolumesOptions::copyTargets: the copy targets of a volume being opened.
  std::shared_ptr<checkpoint::CopyTargets> targetsOf(const std::string& ns, const std::string& uri);

  // For CheckpointVolumesOptions::peerTrees: the trees a restore reads (this node left out).
  std::vector<std::shared_ptr<checkpoint::PeerTree>> treesOf(
      const std::string& ns, const std::string& uri,
      const std::vector<std::pair<std::string, std::string>>& peers);

  // SetCheckpointPeers: this node's own name in the request's peers is left out.
  Status setPeers(CheckpointVolumes& volumes, const v1::SetCheckpointPeersRequest& request);

 private:
  GrpcPeers& grpc_;
  CheckpointFileMover& files_;
  const std::string self_;
  Mutex mutex_;
  std::map<std::pair<std::string, std::string>, std::weak_ptr<VolumePeers>> volumes_
      GRANARY_GUARDED_BY(mutex_);
};

// PutCheckpointFile: reads the pieces from `reader` into the volume's tree.
// Places the copy `header` (its volume, writer, version and whether the origin has it)
// describes in this node's tree of the volume, whole or not at all, `fill` writing its bytes.
Status placeCheckpointCopy(CheckpointVolumes& volumes, const v1::CheckpointFilePiece& header,
                           const std::function<Status(int fd)>& fill);
// Hands the bytes of the file `request` names, in this node's tree, to `each` in order.
Status readCheckpointFileFor(const CheckpointVolumes& volumes,
                             const v1::ReadCheckpointFileRequest& request,
                             const std::function<Status(std::string_view)>& each);

grpc::Status receiveCheckpointFile(CheckpointVolumes& volumes,
                                   grpc::ServerReader<v1::CheckpointFilePiece>& reader);
// UpdateCheckpointCopies.
Status takeCheckpointNews(CheckpointVolumes& volumes,
                          const v1::UpdateCheckpointCopiesRequest& request);
// ListCheckpointFiles and ReadCheckpointFile.
Status listCheckpointFiles(const CheckpointVolumes& volumes, const v1::CheckpointVolumeRef& volume,
                           v1::CheckpointFileList& out);
grpc::Status sendCheckpointFile(const CheckpointVolumes& volumes,
                                const v1::ReadCheckpointFileRequest& request,
                                grpc::ServerWriter<v1::CheckpointFilePiece>& writer);

}  // namespace granary::cache
