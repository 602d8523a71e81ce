#include "tests/support/fake_kubelet.h"

#include <grpcpp/grpcpp.h>

#include "kubelet/podresources/v1/api.grpc.pb.h"

namespace granary::testing {

struct FakeKubelet::Service final : v1::PodResourcesLister::Service {
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* response) override {
    std::lock_guard lock(mutex);
    ++calls;
    for (const auto& pod : pods) {
      v1::PodResources* resources = response->add_pod_resources();
      resources->set_name(pod.podName);
      resources->set_namespace_(pod.podNamespace);
      v1::ContainerResources* container = resources->add_containers();
      container->set_name(pod.container);
      v1::ContainerDevices* devices = container->add_devices();
      devices->set_resource_name(pod.resourceName);
      for (const auto& id : pod.deviceIds) devices->add_device_ids(id);
    }
    return grpc::Status::OK;
  }

  mutable std::mutex mutex;  // guards the two below
  std::vector<FakePodGpus> pods;
  int calls = 0;
  std::unique_ptr<grpc::Server> server;
};

FakeKubelet::FakeKubelet(std::filesystem::path socket)
    : socket_(std::move(socket)), service_(std::make_unique<Service>()) {
  std::filesystem::remove(socket_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_.string(), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  service_->server = builder.BuildAndStart();
}

FakeKubelet::~FakeKubelet() {
  if (service_->server) service_->server->Shutdown();
  std::filesystem::remove(socket_);
}

void FakeKubelet::setPods(std::vector<FakePodGpus> pods) {
  std::lock_guard lock(service_->mutex);
  service_->pods = std::move(pods);
}

int FakeKubelet::listCalls() const {
  std::lock_guard lock(service_->mutex);
  return service_->calls;
}

}  // namespace granary::testing
