// The data plane's server and client over real loopback sockets, with chunks from a fake source:
// the bytes, the token, a flipped byte, a stalled or departed peer, and the bound on connections.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "cache-node/transfer/socket_io.h"
#include "cache-node/transfer/transfer_client.h"
#include "cache-node/transfer/transfer_server.h"
#include "common/log.h"
#include "common/metrics.h"
#include "tests/support/eventually.h"

namespace granary::cache::transfer {
namespace {

using namespace std::chrono_literals;

constexpr const char* kToken = "plane-token";

// Chunks kept as files (served by sendfile), one per path; counts the requests in flight.
class FileChunks final : public ChunkSource {
 public:
  explicit FileChunks(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
  }
  std::string add(const std::string& path, int64_t size, int seed) {
    std::string bytes(static_cast<size_t>(size), '\0');
    std::mt19937 random(seed);
    for (auto& c : bytes) c = static_cast<char>(random());
    std::ofstream(dir_ / path, std::ios::binary) << bytes;
    return bytes;
  }
  Result<PeerChunk> open(const ChunkRequest& request) override {
    const int now = ++inFlight;
    int seen = mostInFlight.load();
    while (now > seen && !mostInFlight.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    --inFlight;
    OwnedFd file(::open((dir_ / request.path).c_str(), O_RDONLY | O_CLOEXEC));
    if (!file) return notFound("no chunk " + request.path);
    std::string bytes(static_cast<size_t>(std::filesystem::file_size(dir_ / request.path)), '\0');
    (void)::pread(file.get(), bytes.data(), bytes.size(), 0);
    PeerChunk chunk;
    chunk.size = static_cast<int64_t>(bytes.size());
    chunk.checksums = ChunkStore::blockChecksums(bytes);
    chunk.file = std::move(file);
    return chunk;
  }
  std::atomic<int> inFlight{0}, mostInFlight{0};
  int delayMs = 0;

 private:
  std::filesystem::path dir_;
};

// Checkpoint files kept in memory by name (the header or request is the name), placed whole or
// not at all.
class MemoryFiles final : public CheckpointFiles {
 public:
  explicit MemoryFiles(std::filesystem::path scratch) : scratch_(std::move(scratch)) {}
  Status place(const std::string& header, const std::function<Status(int fd)>& write) override {
    if (header == "refused") return failedPrecondition("no such volume");
    OwnedFd file(::open(scratch_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    GRANARY_RETURN_IF_ERROR(write(file.get()));
    std::string bytes(static_cast<size_t>(::lseek(file.get(), 0, SEEK_END)), '\0');
    (void)::pread(file.get(), bytes.data(), bytes.size(), 0);
    files[header] = bytes;
    return Status::ok();
  }
  Status read(const std::string& request,
              const std::function<Status(std::string_view)>& each) override {
    const auto found = files.find(request);
    if (found == files.end()) return failedPrecondition("another version");
    const std::string_view bytes = found->second;
    GRANARY_RETURN_IF_ERROR(each(bytes.substr(0, bytes.size() / 2)));
    return each(bytes.substr(bytes.size() / 2));
  }
  std::map<std::string, std::string> files;

 private:
  std::filesystem::path scratch_;
};

class TransferPlaneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("granary-plane-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    source_ = std::make_unique<FileChunks>(dir_);
    files_ = std::make_unique<MemoryFiles>(dir_ / "placing");
    metrics_ = std::move(*TransferMetrics::create(registry_));
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  void serve(TransferServerOptions options = {}) {
    options.address = "127.0.0.1:0";
    options.token = Secret(kToken);
    auto started =
        TransferServer::start(std::move(options), *source_, files_.get(), metrics_.get());
    ASSERT_TRUE(started.isOk()) << started.status();
    server_ = std::move(*started);
  }
  Endpoint endpoint() const { return {.node = "b", .host = "127.0.0.1", .port = server_->port()}; }
  TransferClient client(std::string token = kToken, std::chrono::milliseconds stall = 10s,
                        int connections = 4) {
    return TransferClient({.token = Secret(std::move(token)),
                           .nodeName = "a",
                           .connectionsPerPeer = connections,
                           .stall = stall},
                          metrics_.get());
  }
  static ChunkRequest requestOf(const std::string& path, int64_t length) {
    return {.ns = "ml", .name = "coco", .path = path, .length = length};
  }
  bool exposes(const std::string& series) const {
    return registry_.exposition().find(series) != std::string::npos;
  }

  std::filesystem::path dir_;
  MetricsRegistry registry_;
  std::unique_ptr<TransferMetrics> metrics_;
  std::unique_ptr<FileChunks> source_;
  std::unique_ptr<MemoryFiles> files_;
  std::unique_ptr<TransferServer> server_;
};

TEST_F(TransferPlaneTest, ChunksArriveWholeOverReusedConnections) {
  const std::string big = source_->add("big", 16 << 20, 1);
  const std::string small = source_->add("small", 100'000, 2);
  const std::string empty = source_->add("empty", 0, 3);
  serve();
  TransferClient reader = client();
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(reader.readChunk(endpoint(), requestOf("big", big.size())).valueOr(""), big);
    EXPECT_EQ(reader.readChunk(endpoint(), requestOf("small", small.size())).valueOr("x"), small);
    EXPECT_EQ(reader.readChunk(endpoint(), requestOf("empty", 0)).valueOr("x"), empty);
  }
  // A refusal is an answer: the connection goes on serving.
  EXPECT_EQ(reader.readChunk(endpoint(), requestOf("missing", 10)).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(reader.readChunk(endpoint(), requestOf("big", 5)).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader.readChunk(endpoint(), requestOf("small", small.size())).valueOr(""), small);
  EXPECT_TRUE(exposes("granary_peer_received_bytes_total{peer=\"b\"} " +
                      std::to_string(3 * (big.size() + small.size()) + small.size())))
      << registry_.exposition();
  EXPECT_TRUE(exposes("granary_peer_connections{direction=\"out\"} 1"));
}

// Every line logged, for a test to read.
class Lines final : public LogSink {
 public:
  void write(LogLevel, std::string_view line) override { text += std::string(line) + "\n"; }
  std::string text;
};

TEST_F(TransferPlaneTest, AWrongTokenIsRefusedAndNeitherTokenIsLogged) {
  source_->add("small", 1000, 2);
  auto logged = std::make_shared<Lines>();
  configureLogging({.level = LogLevel::kDebug, .sink = logged});
  serve();
  TransferClient intruder = client("not-the-token-9f2c");
  const auto read = intruder.readChunk(endpoint(), requestOf("small", 1000));
  server_.reset();  // every line of the refusal written
  configureLogging({});
  EXPECT_EQ(read.status().code(), StatusCode::kUnauthenticated) << read.status();
  EXPECT_NE(logged->text.find("refused a data-plane connection"), std::string::npos);
  EXPECT_EQ(logged->text.find("not-the-token-9f2c"), std::string::npos) << logged->text;
  EXPECT_EQ(logged->text.find(kToken), std::string::npos) << logged->text;
  EXPECT_EQ(read.status().message().find("not-the-token"), std::string::npos);
  EXPECT_TRUE(
      exposes("granary_peer_failures_total{cause=\"unauthenticated\",peer=\"127.0.0.1\"} 1"))
      << registry_.exposition();
}

TEST_F(TransferPlaneTest, AByteFlippedOnTheWireFailsTheChunkNamingThePeer) {
  source_->add("big", 4 << 20, 1);
  serve({.flipByteForTests = true});
  TransferClient reader = client();
  const auto read = reader.readChunk(endpoint(), requestOf("big", 4 << 20));
  EXPECT_EQ(read.status().code(), StatusCode::kCorruption) << read.status();
  EXPECT_NE(read.status().message().find("from b"), std::string::npos) << read.status();
  EXPECT_TRUE(exposes("granary_peer_failures_total{cause=\"checksum\",peer=\"b\"} 1"))
      << registry_.exposition();
}

// A listener that takes the hello, answers it and the request's header, sends `sent` bytes of
// `length` and then nothing more.
class StallingPeer {
 public:
  StallingPeer(int64_t length, int64_t sent) {
    listener_ = std::move(*listenTcp("127.0.0.1:0"));
    port_ = boundPort(listener_.get());
    thread_ = std::thread([this, length, sent] {
      connection_ = OwnedFd(::accept(listener_.get(), nullptr, nullptr));
      (void)receiveFrame(connection_.get(), 5s);
      (void)sendAll(connection_.get(), encodeReply({}), 5s);
      (void)receiveFrame(connection_.get(), 5s);
      const std::string bytes(static_cast<size_t>(length), 'x');
      (void)sendAll(connection_.get(),
                    encodeReply({.length = length, .checksums = ChunkStore::blockChecksums(bytes)}),
                    5s);
      (void)sendAll(connection_.get(), std::string_view(bytes).substr(0, sent), 5s);
    });
  }
  ~StallingPeer() { thread_.join(); }
  int port() const { return port_; }

 private:
  OwnedFd listener_, connection_;
  int port_ = 0;
  std::thread thread_;
};

TEST_F(TransferPlaneTest, APeerThatStallsMidChunkFailsItWithinTheStallTime) {
  StallingPeer peer(8 << 20, 1 << 20);
  TransferClient reader = client(kToken, 300ms);
  const auto start = std::chrono::steady_clock::now();
  const auto read = reader.readChunk({.node = "b", .host = "127.0.0.1", .port = peer.port()},
                                     requestOf("big", 8 << 20));
  EXPECT_EQ(read.status().code(), StatusCode::kUnavailable) << read.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(exposes("granary_peer_failures_total{cause=\"stalled\",peer=\"b\"} 1"))
      << registry_.exposition();
}

TEST_F(TransferPlaneTest, AReaderThatStopsCancelsItsTransferAtOnce) {
  StallingPeer peer(8 << 20, 1 << 20);
  TransferClient reader = client(kToken, 60s);
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(200ms);
    stop.request_stop();
  });
  const auto start = std::chrono::steady_clock::now();
  const auto read = reader.readChunk({.node = "b", .host = "127.0.0.1", .port = peer.port()},
                                     requestOf("big", 8 << 20), stop.get_token());
  stopper.join();
  EXPECT_EQ(read.status().code(), StatusCode::kCancelled) << read.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(TransferPlaneTest, AReceiverThatLeavesEndsTheSendersTransfer) {
  source_->add("huge", 64 << 20, 4);
  serve({.stall = 60s});
  // A raw receiver: hello, a request, one read of what arrived, then gone.
  auto connection = connectTcp("127.0.0.1", server_->port(), 5s);
  ASSERT_TRUE(connection.isOk());
  ASSERT_TRUE(sendAll(connection->get(), encodeHello({.token = kToken, .node = "a"}), 5s).isOk());
  ASSERT_TRUE(receiveFrame(connection->get(), 5s).isOk());
  ASSERT_TRUE(sendAll(connection->get(), encodeRequest(requestOf("huge", 64 << 20)), 5s).isOk());
  char some[65536];
  ASSERT_GT(::recv(connection->get(), some, sizeof some, 0), 0);
  connection->reset();
  // The sender stops within moments, not after the stall time, and frees the connection.
  EXPECT_TRUE(testing::eventually(
      [&] { return exposes("granary_peer_failures_total{cause=\"closed\",peer=\"a\"} 1"); }, 5s))
      << registry_.exposition();
  EXPECT_TRUE(testing::eventually(
      [&] { return exposes("granary_peer_connections{direction=\"in\"} 0"); }, 5s));
}

TEST_F(TransferPlaneTest, SixtyFourReadersOfOnePeerShareItsFewConnections) {
  const std::string chunk = source_->add("chunk", 1 << 20, 5);
  source_->delayMs = 5;
  serve();
  TransferClient reader = client(kToken, 10s, /*connections=*/4);
  std::atomic<int> right{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 64; ++i) {
    readers.emplace_back([&] {
      for (int j = 0; j < 4; ++j)
        right += reader.readChunk(endpoint(), requestOf("chunk", 1 << 20)).valueOr("") == chunk;
    });
  }
  for (auto& thread : readers) thread.join();
  EXPECT_EQ(right.load(), 64 * 4);
  EXPECT_LE(source_->mostInFlight.load(), 4);  // no more transfers at once than connections
  EXPECT_TRUE(exposes("granary_peer_connections{direction=\"in\"} 4")) << registry_.exposition();
}

TEST_F(TransferPlaneTest, CheckpointFilesArePutAndReadWholeWithTheirHash) {
  const std::string model = source_->add("model.pt", (5 << 20) + 123, 6);
  serve();
  TransferClient client = this->client();
  OwnedFd source(::open((dir_ / "model.pt").c_str(), O_RDONLY | O_CLOEXEC));
  int64_t paced = 0;
  const auto pace = [&](int64_t bytes) { return (paced += bytes), true; };
  ASSERT_TRUE(client.putFile(endpoint(), "ckpt/model.pt", source.get(), model.size(), pace).isOk());
  EXPECT_EQ(files_->files.at("ckpt/model.pt"), model);
  EXPECT_EQ(paced, static_cast<int64_t>(model.size()));

  // Read back into another file, on the same connection.
  OwnedFd restored(
      ::open((dir_ / "restored").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  int64_t arrived = 0;
  ASSERT_TRUE(client
                  .readFile(endpoint(), "ckpt/model.pt", model.size(), restored.get(),
                            [&](int64_t bytes) { arrived += bytes; })
                  .isOk());
  std::string back(model.size(), '\0');
  ASSERT_EQ(::pread(restored.get(), back.data(), back.size(), 0),
            static_cast<ssize_t>(back.size()));
  EXPECT_EQ(back, model);
  EXPECT_EQ(arrived, static_cast<int64_t>(model.size()));
  EXPECT_TRUE(exposes("granary_peer_sent_bytes_total{peer=\"b\"} " + std::to_string(model.size())))
      << registry_.exposition();

  // Refusals are answers: a version the tree no longer holds, a volume it does not keep.
  EXPECT_EQ(client.readFile(endpoint(), "ckpt/other.pt", 10, restored.get(), [](int64_t) {}).code(),
            StatusCode::kFailedPrecondition);
  const Status refused = client.putFile(endpoint(), "refused", source.get(), model.size(), pace);
  EXPECT_FALSE(refused.isOk());
  EXPECT_EQ(files_->files.size(), 1u);
  // A copy whose pace stops it mid-file is not placed.
  int pieces = 0;
  const Status stopped = client.putFile(endpoint(), "ckpt/half.pt", source.get(), model.size(),
                                        [&](int64_t) { return ++pieces <= 2; });
  EXPECT_EQ(stopped.code(), StatusCode::kCancelled);
  EXPECT_TRUE(testing::eventually(
      [&] { return exposes("granary_peer_failures_total{cause=\"closed\",peer=\"a\"} 1"); }, 5s))
      << registry_.exposition();
  EXPECT_FALSE(files_->files.contains("ckpt/half.pt"));
}

}  // namespace
}  // namespace granary::cache::transfer
