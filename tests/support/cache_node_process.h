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
#include <string>

#include "granary/v1/cache_node.grpc.pb.h"
#include "tests/support/free_port.h"
#include "tests/support/test_certificates.h"

namespace granary::testing {

inline constexpr const char* kToken = "s3cr3t-t0ken";

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
    std::ofstream(root_ / "config.yaml")
        << "nodeName: " << name_ << "\nlisten: 127.0.0.1:" << port_
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

  void start() {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = (root_ / "log").string();
      std::freopen(log.c_str(), "a", stderr);
      const std::string config = (root_ / "config.yaml").string();
      ::execl(GRANARY_CACHE_NODE_BINARY, "granary-cache-node", "--config", config.c_str(), nullptr);
      ::_exit(127);
    }
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

}  // namespace granary::testing
