// A granary-cache-node process for the benchmarks: started from a binary with a config of its own
// under HOME (its API on a free port of a loopback address, a bearer token, a cache directory,
// checkpointOriginRoots HOME's parent, and what `more` adds), and its volumes published over its
// CSI socket as the kubelet publishes a pod's. A process started again on the same HOME finds its
// cache as the last one left it. Header-only, for the benchmarks' mains.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "csi/v1/csi.grpc.pb.h"
#include "granary/v1/cache_node.grpc.pb.h"
#include "tests/support/free_port.h"

namespace granary::bench {

class CacheNodeProcess {
 public:
  static constexpr const char* kToken = "bench-token";

  struct Settings {
    std::string host = "127.0.0.1";  // where its API and data plane listen
    bool dataPlane = true;           // false: chunks to peers over the Peer API
    bool before = false;  // a binary from before the data plane: its options do not name it
    std::string more;     // further lines of its options (YAML)
    std::map<std::string, std::string> env;  // on top of the benchmark's environment
  };

  // `directory` as a root every namespace may use ("shared:" and it; as it is for a version from
  // before the forms of roots, settings.before).
  static std::string sharedRoot(const std::filesystem::path& directory, const Settings& settings) {
    return (settings.before ? "" : "shared:") + directory.string();
  }

  // Starts the process; exits the benchmark when it does not serve within 30 s.
  CacheNodeProcess(const std::string& binary, std::filesystem::path home, std::string name)
      : CacheNodeProcess(binary, std::move(home), std::move(name), Settings()) {}
  CacheNodeProcess(const std::string& binary, std::filesystem::path home, std::string name,
                   const Settings& settings)
      : home_(std::move(home)),
        name_(std::move(name)),
        host_(settings.host),
        port_(testing::freePort()) {
    std::filesystem::create_directories(home_);
    std::ofstream(home_ / "token") << kToken << "\n";
    std::ofstream(home_ / "config.yaml")
        << "nodeName: " << name_ << "\nlisten: " << host_ << ":" << port_
        << (settings.before ? ""
            : settings.dataPlane
                ? "\ntransferListen: \"" + host_ + ":" + std::to_string(testing::freePort()) + "\""
                : "\ntransferListen: \"\"")
        << "\nmetricsAddress: \"\"\ntokenFile: " << (home_ / "token")
        << "\nstateDirectory: " << (home_ / "state")
        << "\ncacheDirectories: [{path: " << (home_ / "cache")
        << ", quota: 10Gi}]\ncsiSocket: " << (home_ / "csi.sock")
        << "\nmountRoot: " << (home_ / "mounts") << "\nmountKeeper: false\ngpuTelemetry: false"
        << "\ncheckpointOriginRoots: [\"" << sharedRoot(home_.parent_path(), settings)
        << "\"]\nlogLevel: warn\n"
        << settings.more << "\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      for (const auto& [variable, value] : settings.env)
        ::setenv(variable.c_str(), value.c_str(), 1);
      const std::string config = (home_ / "config.yaml").string();
      std::freopen((home_ / "log").c_str(), "a", stderr);
      ::execl(binary.c_str(), "granary-cache-node", "--config", config.c_str(), nullptr);
      ::_exit(127);
    }
    csi_ = grpc::CreateChannel("unix://" + (home_ / "csi.sock").string(),
                               grpc::InsecureChannelCredentials());
    api_ =
        v1::CacheNode::NewStub(grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
    if (!csi_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(30))) {
      std::fprintf(stderr, "granary-cache-node did not serve CSI; see %s\n",
                   (home_ / "log").c_str());
      std::exit(1);
    }
  }
  ~CacheNodeProcess() {
    for (const auto& target : targets_) ::umount2(target.c_str(), MNT_DETACH);
    stop(SIGTERM);
  }
  // Sends `signal` (SIGKILL: the node is lost as it runs) and waits for the process to end.
  void stop(int signal) {
    if (pid_ == 0) return;
    ::kill(pid_, signal);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  CacheNodeProcess(const CacheNodeProcess&) = delete;
  CacheNodeProcess& operator=(const CacheNodeProcess&) = delete;

  const std::string& name() const { return name_; }
  std::string address() const { return host_ + ":" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  std::filesystem::path target(const std::string& pod) const {
    return home_ / "pods" / pod / "ckpt";
  }

  // Publishes a checkpoint volume with `attributes` (checkpoints, bandwidthLimit, ...) for `pod`
  // at target(pod), calling again while the node answers that it restores; the seconds until it
  // is bound. Exits the benchmark on another error.
  double publish(const std::string& pod, const std::map<std::string, std::string>& attributes) {
    csi::v1::NodePublishVolumeRequest request;
    request.set_volume_id("csi-" + pod);
    request.set_target_path(target(pod).string());
    request.mutable_volume_capability()->mutable_mount();
    request.mutable_volume_context()->insert(attributes.begin(), attributes.end());
    request.mutable_volume_context()->insert({{"csi.storage.k8s.io/ephemeral", "true"},
                                              {"csi.storage.k8s.io/pod.namespace", "bench"},
                                              {"csi.storage.k8s.io/pod.name", pod},
                                              {"csi.storage.k8s.io/pod.uid", "uid-" + pod}});
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      grpc::ClientContext context;
      csi::v1::NodePublishVolumeResponse response;
      const grpc::Status published =
          csi::v1::Node::NewStub(csi_)->NodePublishVolume(&context, request, &response);
      if (published.ok()) break;
      if (published.error_code() != grpc::StatusCode::UNAVAILABLE) {
        std::fprintf(stderr, "NodePublishVolume on %s: %s\n", name_.c_str(),
                     published.error_message().c_str());
        std::exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    targets_.push_back(target(pod));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // A call of the node's CacheNode API, with the token.
  template <typename Request, typename Response>
  grpc::Status call(grpc::Status (v1::CacheNode::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                             Response*),
                    const Request& request, Response& response) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", std::string("Bearer ") + kToken);
    return ((*api_).*rpc)(&context, request, &response);
  }

 private:
  std::filesystem::path home_;
  std::string name_;
  std::string host_;
  int port_;
  pid_t pid_ = 0;
  std::shared_ptr<grpc::Channel> csi_;
  std::unique_ptr<v1::CacheNode::Stub> api_;
  std::vector<std::filesystem::path> targets_;
};

}  // namespace granary::bench
