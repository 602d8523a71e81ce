// The CSI node plugin (driver csi.granary.io): the Identity and Node services of CSI v1 on a
// unix socket, for kubelet. It serves ephemeral inline volumes: a pod names a Dataset of its
// namespace in volumeAttributes and gets a read-only view of it (MountTable), or a TrainingJob's
// checkpoints and gets their tree read-write (CheckpointVolumes). There is no controller service
// and no staging.
#pragma once

#include <memory>
#include <string>

#include "cache-node/csi/checkpoint_volumes.h"
#include "cache-node/csi/mount_table.h"

namespace grpc {
class Server;
}

namespace granary::cache {

class CsiServer {
 public:
  // Serves on the unix socket `socketPath` (a stale socket file is replaced). Unavailable when
  // it cannot listen there.
  static Result<std::unique_ptr<CsiServer>> start(const std::string& socketPath,
                                                  const std::string& nodeName, MountTable& mounts,
                                                  CheckpointVolumes& checkpoints);
  ~CsiServer();

  struct Services;

 private:
  CsiServer() = default;
  std::unique_ptr<Services> services_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace granary::cache
