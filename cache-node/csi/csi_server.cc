#include "cache-node/csi/csi_server.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <filesystem>

#include "common/grpc_status.h"
#include "common/names.h"
#include "csi/v1/csi.grpc.pb.h"

namespace granary::cache {
namespace {

namespace csi = ::csi::v1;

class IdentityService final : public csi::Identity::Service {
 public:
  grpc::Status GetPluginInfo(grpc::ServerContext*, const csi::GetPluginInfoRequest*,
                             csi::GetPluginInfoResponse* response) override {
    response->set_name(names::kCsiDriver);
    response->set_vendor_version(GRANARY_VERSION);
    return grpc::Status::OK;
  }
  grpc::Status GetPluginCapabilities(grpc::ServerContext*, const csi::GetPluginCapabilitiesRequest*,
                                     csi::GetPluginCapabilitiesResponse*) override {
    return grpc::Status::OK;  // a node plugin only: no controller service
  }
  grpc::Status Probe(grpc::ServerContext*, const csi::ProbeRequest*,
                     csi::ProbeResponse* response) override {
    response->mutable_ready()->set_value(true);
    return grpc::Status::OK;
  }
};

class NodeService final : public csi::Node::Service {
 public:
  NodeService(std::string nodeName, MountTable& mounts, CheckpointVolumes& checkpoints)
      : nodeName_(std::move(nodeName)), mounts_(mounts), checkpoints_(checkpoints) {}

  grpc::Status NodePublishVolume(grpc::ServerContext* context,
                                 const csi::NodePublishVolumeRequest* request,
                                 csi::NodePublishVolumeResponse*) override {
    PublishFields fields{
        .volumeId = request->volume_id(),
        .targetPath = request->target_path(),
        .hasCapability = request->has_volume_capability(),
        .blockAccess = request->volume_capability().has_block(),
        .volumeContext = {request->volume_context().begin(), request->volume_context().end()},
        .secrets = {request->secrets().begin(), request->secrets().end()}};
    if (namesCheckpoints(fields)) {
      auto publication = parseCheckpointPublication(fields);
      if (!publication.isOk()) return toGrpc(publication.status());
      return toGrpc(checkpoints_.publish(*publication, publishDeadline(*context)));
    }
    auto publication = parsePublication(fields);
    if (!publication.isOk()) return toGrpc(publication.status());
    return toGrpc(mounts_.publish(*publication, publishDeadline(*context)));
  }

  grpc::Status NodeUnpublishVolume(grpc::ServerContext*,
                                   const csi::NodeUnpublishVolumeRequest* request,
                                   csi::NodeUnpublishVolumeResponse*) override {
    if (request->volume_id().empty()) return toGrpc(invalidArgument("volume_id: must be set"));
    if (request->target_path().empty()) return toGrpc(invalidArgument("target_path: must be set"));
    if (checkpoints_.holds(request->target_path()))
      return toGrpc(checkpoints_.unpublish(request->target_path()));
    return toGrpc(mounts_.unpublish(request->target_path()));
  }

  grpc::Status NodeStageVolume(grpc::ServerContext*, const csi::NodeStageVolumeRequest*,
                               csi::NodeStageVolumeResponse*) override {
    return {grpc::StatusCode::UNIMPLEMENTED, "granary volumes are not staged"};
  }
  grpc::Status NodeUnstageVolume(grpc::ServerContext*, const csi::NodeUnstageVolumeRequest*,
                                 csi::NodeUnstageVolumeResponse*) override {
    return {grpc::StatusCode::UNIMPLEMENTED, "granary volumes are not staged"};
  }
  grpc::Status NodeExpandVolume(grpc::ServerContext*, const csi::NodeExpandVolumeRequest*,
                                csi::NodeExpandVolumeResponse*) override {
    return {grpc::StatusCode::UNIMPLEMENTED, "granary volumes are not expanded"};
  }
  grpc::Status NodeGetVolumeStats(grpc::ServerContext*, const csi::NodeGetVolumeStatsRequest*,
                                  csi::NodeGetVolumeStatsResponse*) override {
    return {grpc::StatusCode::UNIMPLEMENTED, "granary does not report volume stats through CSI"};
  }
  grpc::Status NodeGetCapabilities(grpc::ServerContext*, const csi::NodeGetCapabilitiesRequest*,
                                   csi::NodeGetCapabilitiesResponse*) override {
    return grpc::Status::OK;  // publish and unpublish only
  }
  grpc::Status NodeGetInfo(grpc::ServerContext*, const csi::NodeGetInfoRequest*,
                           csi::NodeGetInfoResponse* response) override {
    response->set_node_id(nodeName_);
    return grpc::Status::OK;
  }

 private:
  // How long a publish waits for a checkpoint restore, or for a warmFirst volume's share to warm:
  // until shortly before the kubelet's deadline, at most kPublishWait; then it answers how far it
  // is and is called again.
  static std::chrono::steady_clock::time_point publishDeadline(const grpc::ServerContext& context) {
    const auto now = std::chrono::steady_clock::now();
    const auto left = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        context.deadline() - std::chrono::system_clock::now() - std::chrono::seconds(2));
    return now + std::clamp(left, std::chrono::steady_clock::duration::zero(),
                            std::chrono::steady_clock::duration(kPublishWait));
  }
  static constexpr std::chrono::seconds kPublishWait{90};

  std::string nodeName_;
  MountTable& mounts_;
  CheckpointVolumes& checkpoints_;
};

}  // namespace

struct CsiServer::Services {
  IdentityService identity;
  NodeService node;
};

Result<std::unique_ptr<CsiServer>> CsiServer::start(const std::string& socketPath,
                                                    const std::string& nodeName, MountTable& mounts,
                                                    CheckpointVolumes& checkpoints) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(socketPath).parent_path(), error);
  std::filesystem::remove(socketPath, error);  // left by a previous process
  std::unique_ptr<CsiServer> server(new CsiServer());
  server->services_.reset(new Services{{}, NodeService(nodeName, mounts, checkpoints)});
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socketPath, grpc::InsecureServerCredentials());
  builder.RegisterService(&server->services_->identity);
  builder.RegisterService(&server->services_->node);
  server->server_ = builder.BuildAndStart();
  if (!server->server_) return unavailable("cannot serve CSI on unix://" + socketPath);
  return server;
}

CsiServer::~CsiServer() {
  if (server_) server_->Shutdown(grpcDeadlineAfter(std::chrono::seconds(1)));
}

}  // namespace granary::cache
