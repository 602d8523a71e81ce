// Which pod and container each GPU is allocated to, from the kubelet's PodResources API v1
// (proto/kubelet/podresources/v1/api.proto): `List` on the kubelet's unix socket. The device
// ids of nvidia.com/gpu are GPU UUIDs, as NVML reports them; a time-sliced GPU's replicas
// ("GPU-…::2") name their GPU with a suffix, which is dropped. Other resources are ignored.
//
// Thread-safety: gpuOwners() may be called from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/result.h"
#include "kubelet/podresources/v1/api.grpc.pb.h"

namespace granary::cache {

struct GpuOwner {
  std::string podNamespace, podName, container;
  friend bool operator==(const GpuOwner&, const GpuOwner&) = default;
};

// GPU UUID → its owner, from one List answer. Pure.
std::map<std::string, GpuOwner> gpuOwnersOf(const ::v1::ListPodResourcesResponse& response);

class PodResources {
 public:
  // Talks to the kubelet at `socketPath` (a unix socket); connects at the first call.
  explicit PodResources(const std::string& socketPath);
  ~PodResources();

  // Asks the kubelet now (1 s deadline). Unavailable with its reason when it cannot.
  Result<std::map<std::string, GpuOwner>> gpuOwners();

 private:
  const std::string socketPath_;
  const std::unique_ptr<::v1::PodResourcesLister::Stub> stub_;
};

}  // namespace granary::cache
