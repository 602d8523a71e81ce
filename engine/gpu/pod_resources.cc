#include "engine/gpu/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "common/grpc_status.h"

namespace granary::cache {

std::map<std::string, GpuOwner> gpuOwnersOf(const v1::ListPodResourcesResponse& response) {
  std::map<std::string, GpuOwner> owners;
  for (const auto& pod : response.pod_resources())
    for (const auto& container : pod.containers())
      for (const auto& devices : container.devices()) {
        if (devices.resource_name() != "nvidia.com/gpu") continue;
        for (const auto& id : devices.device_ids())
          owners[id.substr(0, id.find("::"))] = {pod.namespace_(), pod.name(), container.name()};
      }
  return owners;
}

PodResources::PodResources(const std::string& socketPath)
    : socketPath_(socketPath),
      stub_(v1::PodResourcesLister::NewStub(  // the channel connects on the first call
          grpc::CreateChannel("unix:" + socketPath, grpc::InsecureChannelCredentials()))) {}

PodResources::~PodResources() = default;

Result<std::map<std::string, GpuOwner>> PodResources::gpuOwners() {
  grpc::ClientContext context;
  context.set_deadline(grpcDeadlineAfter(std::chrono::seconds(1)));
  v1::ListPodResourcesResponse response;
  const grpc::Status status = stub_->List(&context, v1::ListPodResourcesRequest(), &response);
  if (!status.ok())
    return unavailable("the kubelet's PodResources API at " + socketPath_ +
                       " did not answer: " + status.error_message());
  return gpuOwnersOf(response);
}

}  // namespace granary::cache
