// A fake kubelet: the PodResources API v1 (`List`) served on a unix socket, answering with the
// pods and GPUs a test sets, changed at any time. Started by the constructor, stopped by the
// destructor (which removes the socket).
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace granary::testing {

struct FakePodGpus {
  std::string podNamespace, podName, container;
  std::vector<std::string> deviceIds;  // as the device plugin names them: GPU UUIDs
  std::string resourceName = "nvidia.com/gpu";
};

class FakeKubelet {
 public:
  explicit FakeKubelet(std::filesystem::path socket);
  ~FakeKubelet();

  void setPods(std::vector<FakePodGpus> pods);
  const std::filesystem::path& socket() const { return socket_; }
  int listCalls() const;

  struct Service;

 private:
  std::filesystem::path socket_;
  std::unique_ptr<Service> service_;
};

}  // namespace granary::testing
