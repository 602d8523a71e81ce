// One granary-cache-node process for tests: its own state directory, ports and token, started
// with fork+exec, killed with any signal; a gRPC stub to its CacheNode API. The test target
// defines GRANARY_CACHE_NODE_BINARY.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "csi/v1/csi.grpc.pb.h"
#include "granary/v1/cache_node.grpc.pb.h"
#include "tests/support/eventually.h"
#include "tests/support/free_port.h"
#include "tests/support/spawn.h"
#include "tests/support/test_certificates.h"

namespace granary::testing {

inline constexpr const char* kToken = "s3cr3t-t0ken";

// A root of file:// origins shared by every namespace, as a YAML flow item of the node's options
// (fileOriginRoots, checkpointOriginRoots): "shared:DIR", quoted.
inline std::string sharedRoot(const std::filesystem::path& directory) {
  return "\"shared:" + directory.string() + "\"";
}
// A root of namespaces: each namespace only DIR/<its name>.
inline std::string rootOfNamespaces(const std::filesystem::path& directory) {
  return "\"" + (directory / "{namespace}").string() + "\"";
}

// One granary-cache-node process with its own ports, and its own state directory unless
// `stateRoot` names the root of another's (a pod replacing another on the same node).
class NodeProcess {
 public:
  NodeProcess(std::filesystem::path root, std::string name, const TestCertificates* tls = nullptr,
              std::string keeperSocket = "", std::filesystem::path stateRoot = "")
      : root_(std::move(root)),
        name_(std::move(name)),
        port_(freePort()),
        metricsPort_(freePort()),
        tls_(tls),
        stateRoot_(stateRoot.empty() ? root_ : stateRoot) {
    std::filesystem::create_directories(root_);
    if (stateRoot.empty()) stateRoot = root_;
    std::ofstream(root_ / "token") << kToken << "\n";
    // Every port named (not 0: the kernel may pick for the data plane the one the API is to take).
    std::ofstream(root_ / "config.yaml")
        << "nodeName: " << name_ << "\nlisten: 127.0.0.1:" << port_
        << "\ntransferListen: 127.0.0.1:" << freePort()
        << "\nmetricsAddress: 127.0.0.1:" << metricsPort_ << "\ntokenFile: " << (root_ / "token")
        << "\nstateDirectory: " << (stateRoot / "state")
        << "\ncacheDirectories:\n  - path: " << (stateRoot / "cache")
        << "\n    quota: 1Gi\nwarmConcurrency: 4\ncsiSocket: " << (stateRoot / "csi.sock")
        << "\nmountRoot: " << (stateRoot / "mounts") << "\n";
    if (!keeperSocket.empty())
      std::ofstream(root_ / "config.yaml", std::ios::app)
          << "mountKeeperSocket: " << keeperSocket << "\n";
    if (tls_) {
      std::ofstream(root_ / "config.yaml", std::ios::app)
          << "tls:\n  certificateFile: " << tls_->serverPemFile
          << "\n  keyFile: " << tls_->serverPemFile << "\n  caFile: " << tls_->caFile << "\n";
    }
  }
  ~NodeProcess() { kill(SIGKILL); }

  // More lines of its options file (cache-node/options.h), for the next start().
  void addOptions(const std::string& yaml) {
    std::ofstream(root_ / "config.yaml", std::ios::app) << yaml << "\n";
  }

  // `env`: on top of this process's environment (test hooks).
  void start(std::map<std::string, std::string> env = {}) {
    pid_ = spawnProcess({GRANARY_CACHE_NODE_BINARY, "--config", (root_ / "config.yaml").string()},
                        {.log = root_ / "log", .env = std::move(env)});
    channel_ =
        grpc::CreateChannel(address(), tls_ ? grpc::SslCredentials({.pem_root_certs = tls_->caPem})
                                            : grpc::InsecureChannelCredentials());
    stub_ = v1::CacheNode::NewStub(channel_);
    ASSERT_TRUE(
        channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)))
        << name_ << " did not start; its log:\n"
        << log();
  }
  void kill(int signal) {
    if (pid_ <= 0) return;
    channel_.reset();
    stub_.reset();
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
  }
  std::string log() const {
    std::ifstream in(root_ / "log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string csiAddress() const { return "unix://" + (stateRoot_ / "csi.sock").string(); }
  const std::string& name() const { return name_; }
  int metricsPort() const { return metricsPort_; }
  pid_t pid() const { return pid_; }
  v1::CacheNode::Stub& api() { return *stub_; }

 private:
  std::filesystem::path root_;
  std::string name_;
  int port_;
  int metricsPort_;
  const TestCertificates* tls_;
  std::filesystem::path stateRoot_;
  pid_t pid_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CacheNode::Stub> stub_;
};

// granary-cache-node --serve-mount-keeper: holds dataset mounts across node restarts, for the
// nodes with the test's token.
class KeeperProcess {
 public:
  explicit KeeperProcess(std::filesystem::path socket)
      : socket_(std::move(socket)),
        log_(socket_.string() + "." + std::to_string(started_++) + ".log") {
    const std::string token = socket_.string() + ".token";
    std::filesystem::create_directories(socket_.parent_path());
    std::ofstream(token) << kToken << "\n";
    const bool replacing = std::filesystem::exists(socket_);
    pid_ = spawnProcess({GRANARY_CACHE_NODE_BINARY, "--serve-mount-keeper", socket_.string(),
                         "--token-file", token},
                        {.log = log_});
    // Listening once it took the old keeper's mounts over, or once its socket is there.
    const bool listening =
        replacing
            ? eventually([&] { return log().find("took over the mounts") != std::string::npos; },
                         std::chrono::seconds(15))
            : eventually([&] { return std::filesystem::exists(socket_); },
                         std::chrono::seconds(15));
    if (!listening) ADD_FAILURE() << "the mount keeper did not start: " << log();
  }
  std::string log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // Ends it as a hard kill of its pod would.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  ~KeeperProcess() { stop(); }
  // A graceful stop (SIGTERM), waited for.
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }
  const std::filesystem::path& socket() const { return socket_; }

 private:
  static inline int started_ = 0;
  std::filesystem::path socket_;
  std::string log_;
  pid_t pid_;
};

// A pod's inline volume of a Dataset.
struct PodVolume {
  std::string dataset = "coco";
  std::string podNamespace = "ml", podName = "worker-0", podUid = "uid-a";
  std::string version;  // volumeAttributes.version; "" for the newest
};

// A pod's volume, published through the node's CSI socket, as the kubelet does.
inline grpc::Status publishVolume(NodeProcess& node, const std::filesystem::path& target,
                                  const PodVolume& volume = {}) {
  auto channel = grpc::CreateChannel(node.csiAddress(), grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)))
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no CSI socket");
  csi::v1::NodePublishVolumeRequest request;
  request.set_volume_id("csi-0123");
  request.set_target_path(target.string());
  request.mutable_volume_capability()->mutable_mount();
  request.mutable_volume_context()->insert(
      {{"dataset", volume.dataset},
       {"csi.storage.k8s.io/ephemeral", "true"},
       {"csi.storage.k8s.io/pod.namespace", volume.podNamespace},
       {"csi.storage.k8s.io/pod.name", volume.podName},
       {"csi.storage.k8s.io/pod.uid", volume.podUid}});
  if (!volume.version.empty()) (*request.mutable_volume_context())["version"] = volume.version;
  grpc::ClientContext context;
  csi::v1::NodePublishVolumeResponse response;
  return csi::v1::Node::NewStub(channel)->NodePublishVolume(&context, request, &response);
}

// The kubelet's unpublish of that volume: the pod ended.
inline grpc::Status unpublishVolume(NodeProcess& node, const std::filesystem::path& target) {
  auto channel = grpc::CreateChannel(node.csiAddress(), grpc::InsecureChannelCredentials());
  csi::v1::NodeUnpublishVolumeRequest request;
  request.set_volume_id("csi-0123");
  request.set_target_path(target.string());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  csi::v1::NodeUnpublishVolumeResponse response;
  return csi::v1::Node::NewStub(channel)->NodeUnpublishVolume(&context, request, &response);
}

}  // namespace granary::testing
