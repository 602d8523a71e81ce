// Two granary-cache-node processes on loopback and a web origin: the chunks one reads of the
// other's share cross the data plane (cache-node/transfer/), and every fault on the way (a wrong
// token, a flipped byte, a peer that stalls or dies) ends in the origin's bytes.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "cache-node/transfer/frame.h"
#include "cache-node/transfer/socket_io.h"
#include "granary/v1/cache_node.grpc.pb.h"
#include "granary/v1/peer.grpc.pb.h"
#include "tests/support/cache_node_process.h"
#include "tests/support/eventually.h"
#include "tests/support/http_file_server.h"
#include "tests/support/http_get.h"

namespace granary::cache {
namespace {

using namespace std::chrono_literals;
using testing::kToken;

#if defined(__SANITIZE_ADDRESS__)
constexpr long kSanitizerQuarantineMib = 256;
#else
constexpr long kSanitizerQuarantineMib = 0;
#endif
using testing::NodeProcess;

std::unique_ptr<grpc::ClientContext> authorized() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->AddMetadata("authorization", std::string("Bearer ") + kToken);
  return context;
}

class DataPlaneProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("granary-plane-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::mt19937 random(11);
    for (int i = 0; i < 12; ++i) {
      std::string data((1 << 20) + 377'000 * i, '\0');
      for (auto& c : data) c = static_cast<char>(random());
      std::filesystem::create_directories(root_ / "origin" / "train");
      const std::string path = "train/shard-" + std::to_string(i) + ".bin";
      std::ofstream(root_ / "origin" / path, std::ios::binary) << data;
      files_[path] = data;
    }
    origin_ = std::move(*testing::HttpFileServer::start(root_ / "origin"));
  }
  void TearDown() override {
    if (HasFailure()) {  // what the nodes said, for a failure that does not say why
      if (a_) std::cerr << "a's log:\n" << a_->log() << "\n";
      if (b_) std::cerr << "b's log:\n" << b_->log() << "\n";
    }
    a_.reset();
    b_.reset();
    std::filesystem::remove_all(root_);
  }

  // Starts a and b with these further options and b's environment, ensures ml/coco on both
  // (chunks of 1 MiB, one copy of each file in the set) and waits until both are Ready.
  void startPair(const std::string& optionsOfA = "",
                 std::map<std::string, std::string> envOfB = {}) {
    a_ = std::make_unique<NodeProcess>(root_ / "a", "a");
    b_ = std::make_unique<NodeProcess>(root_ / "b", "b");
    if (!optionsOfA.empty()) a_->addOptions(optionsOfA);
    a_->start();
    b_->start(std::move(envOfB));
    v1::EnsureDatasetRequest request;
    request.mutable_dataset()->set_namespace_("ml");
    request.mutable_dataset()->set_name("coco");
    request.mutable_dataset()->set_generation(1);
    request.mutable_dataset()->set_uid("uid-1");
    request.add_mounts()->mutable_source()->set_uri(origin_->url());
    request.mutable_cache()->set_replicas(1);
    request.mutable_cache()->set_chunk_size_bytes(1 << 20);
    for (NodeProcess* node : {a_.get(), b_.get()}) {
      auto* endpoint = request.add_node_set();
      endpoint->set_node_name(node->name());
      endpoint->set_address(node->address());
    }
    for (NodeProcess* node : {a_.get(), b_.get()}) {
      v1::EnsureDatasetResponse response;
      const grpc::Status ensured =
          node->api().EnsureDataset(authorized().get(), request, &response);
      ASSERT_TRUE(ensured.ok()) << ensured.error_message();
    }
    for (NodeProcess* node : {a_.get(), b_.get()}) {
      ASSERT_TRUE(testing::eventually([&] { return ready(*node); }, 30s)) << node->log();
    }
  }

  static bool ready(NodeProcess& node) {
    v1::GetDatasetStatusRequest request;
    request.mutable_dataset()->set_namespace_("ml");
    request.mutable_dataset()->set_name("coco");
    v1::DatasetStatus status;
    return node.api().GetDatasetStatus(authorized().get(), request, &status).ok() &&
           status.phase() == v1::DATASET_PHASE_READY;
  }

  // The whole file as `node` reads it, counting its bytes by source.
  static std::string readFile(NodeProcess& node, const std::string& path,
                              std::map<v1::ReadSource, int64_t>* sources = nullptr) {
    v1::ReadRequest request;
    request.mutable_dataset()->set_namespace_("ml");
    request.mutable_dataset()->set_name("coco");
    request.set_path(path);
    request.set_length(-1);
    auto context = authorized();
    auto reader = node.api().Read(context.get(), request);
    std::string data;
    v1::ReadResponse piece;
    while (reader->Read(&piece)) {
      data += piece.data();
      if (sources) (*sources)[piece.source()] += static_cast<int64_t>(piece.data().size());
    }
    const grpc::Status status = reader->Finish();
    EXPECT_TRUE(status.ok()) << path << ": " << status.error_message();
    return data;
  }

  // The files b holds (a reads them from b), read once through a, each equal to the origin's.
  std::vector<std::string> readAllThroughA() {
    std::vector<std::string> ofB;
    for (const auto& [path, data] : files_) {
      std::map<v1::ReadSource, int64_t> sources;
      EXPECT_EQ(readFile(*a_, path, &sources), data) << path;
      EXPECT_EQ(sources[v1::READ_SOURCE_ORIGIN], 0) << path;
      if (sources[v1::READ_SOURCE_PEER] > 0) ofB.push_back(path);
    }
    return ofB;
  }

  // The value of the series `series` (its name and labels, as exposed) on `node`; -1 if absent.
  static double metric(const NodeProcess& node, const std::string& series) {
    std::string body;
    testing::httpGet("http://127.0.0.1:" + std::to_string(node.metricsPort()) + "/metrics", body);
    const auto at = body.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stod(body.substr(at + series.size() + 2));
  }

  // Where `node`'s data plane listens, as it tells its peers.
  static int planePort(NodeProcess& node) {
    auto peer =
        v1::Peer::NewStub(grpc::CreateChannel(node.address(), grpc::InsecureChannelCredentials()));
    v1::DescribeTransferResponse described;
    const grpc::Status status =
        peer->DescribeTransfer(authorized().get(), v1::DescribeTransferRequest(), &described);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return described.port();
  }

  int64_t bytesOf(const std::vector<std::string>& paths) const {
    int64_t total = 0;
    for (const auto& path : paths) total += static_cast<int64_t>(files_.at(path).size());
    return total;
  }
  int64_t datasetBytes() const {
    int64_t total = 0;
    for (const auto& [_, data] : files_) total += static_cast<int64_t>(data.size());
    return total;
  }

  std::filesystem::path root_;
  std::unique_ptr<testing::HttpFileServer> origin_;
  std::map<std::string, std::string> files_;
  std::unique_ptr<NodeProcess> a_, b_;
};

TEST_F(DataPlaneProcessTest, ChunksOfAPeerCrossTheDataPlaneWithTheOriginsBytes) {
  startPair();
  ASSERT_GT(planePort(*b_), 0);
  const auto ofB = readAllThroughA();
  ASSERT_FALSE(ofB.empty());
  EXPECT_EQ(origin_->bytesServed(), datasetBytes());  // each byte once: warming, not reading
  // Every byte of b's files came over the plane, each chunk once.
  EXPECT_EQ(metric(*a_, "granary_peer_received_bytes_total{peer=\"b\"}"), bytesOf(ofB));
  EXPECT_EQ(metric(*b_, "granary_peer_sent_bytes_total{peer=\"a\"}"), bytesOf(ofB));
}

TEST_F(DataPlaneProcessTest, AConnectionWithoutTheTokenIsRefusedAndLoggedWithoutIt) {
  startPair();
  auto connection = transfer::connectTcp("127.0.0.1", planePort(*b_), 5s);
  ASSERT_TRUE(connection.isOk()) << connection.status();
  const int socket = connection->get();
  ASSERT_TRUE(
      transfer::sendAll(socket, transfer::encodeHello({.token = "guessed-7f3a", .node = "x"}), 5s)
          .isOk());
  auto answer = transfer::receiveFrame(socket, 5s);
  ASSERT_TRUE(answer.isOk()) << answer.status();
  EXPECT_EQ(transfer::decodeReply(*answer)->status.code(), StatusCode::kUnauthenticated);
  // Nothing is served on it: the node closed it (at once, or with a reset for the request).
  (void)transfer::sendAll(
      socket, transfer::encodeRequest({.ns = "ml", .name = "coco", .path = "train/shard-0.bin"}),
      5s);
  const auto served = transfer::receiveFrame(socket, 5s);
  EXPECT_TRUE(served.status().code() == StatusCode::kNotFound ||
              (served.status().code() == StatusCode::kUnavailable &&
               served.status().message().find("stalled") == std::string::npos))
      << served.status();
  EXPECT_TRUE(testing::eventually(
      [&] { return b_->log().find("refused a data-plane connection") != std::string::npos; }, 5s));
  EXPECT_EQ(b_->log().find("guessed-7f3a"), std::string::npos) << b_->log();
  EXPECT_EQ(b_->log().find(kToken), std::string::npos);
  EXPECT_EQ(
      metric(*b_, "granary_peer_failures_total{cause=\"unauthenticated\",peer=\"127.0.0.1\"}"), 1);
  EXPECT_EQ(metric(*b_, "granary_peer_sent_bytes_total{peer=\"x\"}"), -1);
}

TEST_F(DataPlaneProcessTest, AByteFlippedOnTheWireIsRefusedAndTheOriginServesTheChunk) {
  startPair("", {{"GRANARY_TEST_TRANSFER_FLIP_BYTE", "1"}});
  std::vector<std::string> ofB;
  for (const auto& [path, data] : files_) {
    std::map<v1::ReadSource, int64_t> sources;
    EXPECT_EQ(readFile(*a_, path, &sources), data) << path;
    if (sources[v1::READ_SOURCE_ORIGIN] > 0) ofB.push_back(path);
  }
  ASSERT_FALSE(ofB.empty());
  EXPECT_EQ(origin_->bytesServed(), datasetBytes() + bytesOf(ofB));
  EXPECT_GE(metric(*a_, "granary_peer_failures_total{cause=\"checksum\",peer=\"b\"}"), 1);
  EXPECT_EQ(metric(*a_, "granary_peer_received_bytes_total{peer=\"b\"}"), -1);
  EXPECT_NE(a_->log().find("peer=b"), std::string::npos) << a_->log();
}

TEST_F(DataPlaneProcessTest, APeerThatStopsAnsweringLosesItsChunksToTheOriginWithinTheStallTime) {
  // a holds no chunk of b's after a read, so that each read asks b again.
  startPair("heldChunkMemory: 0\ntransferStallMs: 500");
  const auto ofB = readAllThroughA();
  ASSERT_FALSE(ofB.empty());
  const std::string& path = ofB.front();
  ::kill(b_->pid(), SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(readFile(*a_, path), files_.at(path));
  const auto took = std::chrono::steady_clock::now() - start;
  ::kill(b_->pid(), SIGCONT);
  EXPECT_LT(took, 15s);
  EXPECT_GE(metric(*a_, "granary_peer_failures_total{cause=\"stalled\",peer=\"b\"}"), 1);
  EXPECT_GE(origin_->bytesServedOf(path), 2 * static_cast<int64_t>(files_.at(path).size()));
}

TEST_F(DataPlaneProcessTest, APeerKilledMidTransferLeavesTheReadToTheOrigin) {
  startPair("heldChunkMemory: 0");  // the stall time stays 30 s: the kill must end it sooner
  const auto ofB = readAllThroughA();
  ASSERT_FALSE(ofB.empty());
  const std::string& path = ofB.back();
  ::kill(b_->pid(), SIGSTOP);  // b takes the request and sends nothing ...
  std::string read;
  const auto start = std::chrono::steady_clock::now();
  std::thread reader([&] { read = readFile(*a_, path); });
  std::this_thread::sleep_for(500ms);
  b_->kill(SIGKILL);  // ... until it dies with the request open
  reader.join();
  EXPECT_EQ(read, files_.at(path));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  // The connection a held (or had just opened) ended with b: counted as closed, or, where a
  // held one was tried again on a new one, as a connection nobody answered.
  const auto count = [&](const char* cause) {
    return std::max(0.0, metric(*a_, std::string("granary_peer_failures_total{cause=\"") + cause +
                                         "\",peer=\"b\"}"));
  };
  EXPECT_GE(count("closed") + count("connect"), 1);
}

TEST_F(DataPlaneProcessTest, SixtyFourReadersOfOnePeerUseAFewConnectionsAndBoundedMemory) {
  startPair("heldChunkMemory: 8Mi\ntransferConnectionsPerPeer: 4");
  const auto ofB = readAllThroughA();
  ASSERT_FALSE(ofB.empty());
  const auto peakOf = [](pid_t pid) {  // VmHWM, KiB
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line))
      if (line.starts_with("VmHWM:")) return std::stol(line.substr(6));
    return 0L;
  };
  const long before = peakOf(a_->pid());
  std::atomic<int> right{0};
  std::atomic<bool> done{false};
  double mostConnections = 0;
  std::thread sampler([&] {
    while (!done) {
      mostConnections =
          std::max(mostConnections, metric(*b_, "granary_peer_connections{direction=\"in\"}"));
      std::this_thread::sleep_for(20ms);
    }
  });
  std::vector<std::thread> readers;
  for (int i = 0; i < 64; ++i) {
    readers.emplace_back([&, i] {
      const std::string& path = ofB[static_cast<size_t>(i) % ofB.size()];
      right += readFile(*a_, path) == files_.at(path);
    });
  }
  for (auto& thread : readers) thread.join();
  done = true;
  sampler.join();
  EXPECT_EQ(right.load(), 64);
  EXPECT_GE(mostConnections, 1);
  EXPECT_LE(mostConnections, 4);
  // 64 readers of 1 MiB chunks: a's peak grows by at most what the readers' buffers, the held
  // chunks (8 MiB) and four transfers in flight take, not by a chunk per read. (Under
  // AddressSanitizer freed memory waits in its 256 MiB quarantine before it is used again.)
  EXPECT_LT(peakOf(a_->pid()) - before, (160 + kSanitizerQuarantineMib) * 1024) << "KiB";
}

}  // namespace
}  // namespace granary::cache
