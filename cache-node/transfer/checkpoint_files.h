// The data plane's CheckpointFiles over the node's checkpoint volumes: a peer's copy placed in
// this node's tree of its volume, a file of the tree read for a peer's restore, as the Peer
// service's PutCheckpointFile and ReadCheckpointFile do (checkpoint_peers.h).
#pragma once

#include "cache-node/checkpoint_peers.h"
#include "cache-node/transfer/transfer_server.h"

namespace granary::cache::transfer {

class VolumeFiles final : public CheckpointFiles {
 public:
  explicit VolumeFiles(CheckpointVolumes& volumes) : volumes_(volumes) {}

  Status place(const std::string& header, const std::function<Status(int fd)>& write) override {
    v1::CheckpointFilePiece piece;
    if (!piece.ParseFromString(header)) return invalidArgument("a malformed checkpoint file put");
    return placeCheckpointCopy(volumes_, piece, write);
  }
  Status read(const std::string& request,
              const std::function<Status(std::string_view)>& each) override {
    v1::ReadCheckpointFileRequest asked;
    if (!asked.ParseFromString(request)) return invalidArgument("a malformed checkpoint file read");
    return readCheckpointFileFor(volumes_, asked, each);
  }

 private:
  CheckpointVolumes& volumes_;
};

}  // namespace granary::cache::transfer
