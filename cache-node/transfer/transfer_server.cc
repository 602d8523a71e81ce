#include "cache-node/transfer/transfer_server.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <utility>

#include "cache-node/transfer/file_stream.h"
#include "cache-node/transfer/socket_io.h"
#include "common/log.h"

namespace granary::cache::transfer {
namespace {

const Logger& log() {
  static const Logger logger("transfer");
  return logger;
}

// "ip" of "ip:port": a label that does not grow with every connection.
std::string hostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

FailureCause causeOf(const Status& error) {
  switch (error.code()) {
    case StatusCode::kUnavailable:
      return error.message().find("stalled") != std::string::npos ? FailureCause::kStalled
                                                                  : FailureCause::kClosed;
    case StatusCode::kInvalidArgument:
      return FailureCause::kProtocol;
    case StatusCode::kCorruption:
      return FailureCause::kChecksum;
    case StatusCode::kCancelled:
      return FailureCause::kClosed;
    default:
      return FailureCause::kRefused;
  }
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Result<std::unique_ptr<TransferServer>> TransferServer::start(TransferServerOptions options,
                                                              ChunkSource& source,
                                                              CheckpointFiles* files,
                                                              TransferMetrics* metrics) {
  GRANARY_ASSIGN_OR_RETURN(OwnedFd listener, listenTcp(options.address));
  return std::unique_ptr<TransferServer>(
      new TransferServer(std::move(options), std::move(listener), source, files, metrics));
}

TransferServer::TransferServer(TransferServerOptions options, OwnedFd listener, ChunkSource& source,
                               CheckpointFiles* files, TransferMetrics* metrics)
    : options_(std::move(options)),
      listener_(std::move(listener)),
      port_(boundPort(listener_.get())),
      source_(source),
      files_(files),
      metrics_(metrics),
      acceptor_([this](std::stop_token stop) { acceptLoop(stop); }) {}

TransferServer::~TransferServer() {
  acceptor_.request_stop();
  acceptor_.join();
  MutexLock lock(mutex_);
  stopping_ = true;
  for (const int connection : open_) ::shutdown(connection, SHUT_RDWR);
  allClosed_.wait(lock, [this]() GRANARY_REQUIRES(mutex_) { return open_.empty(); });
}

void TransferServer::acceptLoop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    pollfd ready{.fd = listener_.get(), .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, 200) <= 0) continue;
    OwnedFd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!connection) continue;
    if (!track(connection.get())) {
      log().warn("refused a data-plane connection: too many open",
                 {{"peer", peerAddressOf(connection.get())},
                  {"limit", std::to_string(options_.maxConnections)}});
      continue;
    }
    std::thread([this, connection = std::move(connection)]() mutable {
      // sendfile has no MSG_NOSIGNAL: a receiver gone mid-chunk raises SIGPIPE, which this
      // thread keeps pending (and drops as it ends) while sendfile fails with EPIPE.
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      serve(connection.get());
      untrack(connection.get());  // the last use of this server; the socket closes after it
    }).detach();
  }
}

bool TransferServer::track(int connection) {
  MutexLock lock(mutex_);
  if (stopping_ || static_cast<int>(open_.size()) >= options_.maxConnections) return false;
  open_.insert(connection);
  if (metrics_) metrics_->connections("in", +1);
  return true;
}

void TransferServer::untrack(int connection) {
  MutexLock lock(mutex_);
  open_.erase(connection);
  if (metrics_) metrics_->connections("in", -1);
  allClosed_.notify_all();
}

void TransferServer::serve(int connection) {
  const std::string address = peerAddressOf(connection);
  const auto node = admit(connection, address);
  if (!node) return;
  setSendTimeout(connection, options_.stall);
  while (true) {
    auto frame = receiveFrame(connection, options_.idle);
    if (!frame.isOk()) return;  // closed, idle or cut: the client opens another when it needs one
    if (isFileTransfer(*frame)) {
      auto transfer = decodeFileTransfer(*frame);
      if (transfer.isOk() && answerFile(connection, *transfer, *node)) continue;
      return;
    }
    auto request = decodeRequest(*frame);
    if (!request.isOk()) {
      if (metrics_) metrics_->failed(hostOf(address), FailureCause::kProtocol);
      log().warn("closed a data-plane connection: a malformed request",
                 {{"peer", address}, {"error", request.status().message()}});
      return;
    }
    if (!answer(connection, *request, *node)) return;
  }
}

std::optional<std::string> TransferServer::admit(int connection, const std::string& address) {
  auto frame = receiveFrame(connection, options_.stall);
  if (!frame.isOk()) return std::nullopt;
  auto hello = decodeHello(*frame);
  Status verdict = Status::ok();
  if (!hello.isOk()) {
    verdict = hello.status();
  } else if (hello->version != kVersion) {
    verdict = failedPrecondition("data-plane version " + std::to_string(hello->version) +
                                 " (this node speaks " + std::to_string(kVersion) + ")");
  } else if (!options_.token.matches(hello->token)) {
    verdict = Status(StatusCode::kUnauthenticated, "the data plane needs the cluster's token");
  }
  if (!verdict.isOk()) {
    // Neither the token presented nor ours is logged: only who tried.
    log().warn("refused a data-plane connection",
               {{"peer", address}, {"reason", verdict.message()}});
    if (metrics_) {
      metrics_->failed(hostOf(address), verdict.code() == StatusCode::kUnauthenticated
                                            ? FailureCause::kUnauthenticated
                                            : FailureCause::kProtocol);
    }
  }
  (void)sendAll(connection, encodeReply({.status = verdict}), options_.stall);
  if (!verdict.isOk()) return std::nullopt;
  return hello->node.empty() ? hostOf(address) : hello->node;
}

bool TransferServer::answer(int connection, const ChunkRequest& request, const std::string& peer) {
  const auto start = std::chrono::steady_clock::now();
  auto chunk = source_.open(request);
  if (chunk.isOk() && request.length > 0 && chunk->size != request.length) {
    chunk = failedPrecondition("chunk " + std::to_string(request.index) + " of " + request.path +
                               " is " + std::to_string(chunk->size) + " bytes here, not " +
                               std::to_string(request.length));
  }
  if (!chunk.isOk()) {
    return sendAll(connection, encodeReply({.status = chunk.status()}), options_.stall).isOk();
  }
  const Reply header{.length = chunk->size, .checksums = chunk->checksums};
  Status sent = sendAll(connection, encodeReply(header), options_.stall, /*more=*/true);
  if (sent.isOk()) sent = sendChunk(connection, *chunk);
  if (!sent.isOk()) {
    // The receiver left (a reader that went away) or stopped reading: its transfer ends here.
    if (metrics_) metrics_->failed(peer, causeOf(sent));
    log().debug("a chunk's transfer ended early",
                {{"peer", peer}, {"path", request.path}, {"error", sent.message()}});
    return false;
  }
  if (metrics_) metrics_->sent(peer, chunk->size, secondsSince(start));
  return true;
}

bool TransferServer::answerFile(int connection, const FileTransfer& transfer,
                                const std::string& peer) {
  if (files_ == nullptr) {
    (void)sendAll(
        connection,
        encodeReply({.status = failedPrecondition("this node keeps no checkpoint volumes")}),
        options_.stall);
    return false;  // a put's bytes would follow: the connection ends here
  }
  return transfer.put ? receiveFile(connection, transfer, peer)
                      : sendFile(connection, transfer, peer);
}

bool TransferServer::receiveFile(int connection, const FileTransfer& put, const std::string& peer) {
  const auto start = std::chrono::steady_clock::now();
  bool consumed = false;  // every byte and the trailer read: the connection is in step
  const Status placed = files_->place(put.message, [&](int fd) -> Status {
    Xxh3Stream hash;
    GRANARY_RETURN_IF_ERROR(receiveFileBytes(connection, fd, put.length, options_.stall, hash));
    GRANARY_ASSIGN_OR_RETURN(const std::string frame, receiveFrame(connection, options_.stall));
    GRANARY_ASSIGN_OR_RETURN(const uint64_t sent, decodeTrailer(frame));
    consumed = true;
    return sent == hash.digest() ? Status::ok() : corruption("the copy failed its checksum");
  });
  if (metrics_) {
    if (placed.isOk())
      metrics_->received(peer, put.length, secondsSince(start));
    else
      metrics_->failed(peer, causeOf(placed));
  }
  const bool replied = sendAll(connection, encodeReply({.status = placed}), options_.stall).isOk();
  return replied && consumed;
}

bool TransferServer::sendFile(int connection, const FileTransfer& read, const std::string& peer) {
  const auto start = std::chrono::steady_clock::now();
  Xxh3Stream hash;
  int64_t sent = 0;
  const Status done = files_->read(read.message, [&](std::string_view bytes) -> Status {
    if (sent == 0) {  // the reply goes once the file is open in the version asked
      GRANARY_RETURN_IF_ERROR(
          sendAll(connection, encodeReply({.length = read.length}), options_.stall, /*more=*/true));
    }
    if (sent + static_cast<int64_t>(bytes.size()) > read.length)
      return failedPrecondition("the file is longer than asked");
    hash.add(bytes);
    sent += static_cast<int64_t>(bytes.size());
    return sendAll(connection, bytes, options_.stall, /*more=*/true);
  });
  if (sent == 0 && !done.isOk())  // nothing sent yet: an answer, and the connection goes on
    return sendAll(connection, encodeReply({.status = done}), options_.stall).isOk();
  if (!done.isOk() || sent != read.length) {
    if (metrics_) metrics_->failed(peer, causeOf(done.isOk() ? unavailable("cut short") : done));
    return false;  // cut mid-file: the receiver sees it end early
  }
  if (sent == 0 && !sendAll(connection, encodeReply({}), options_.stall, true).isOk()) return false;
  if (!sendAll(connection, encodeTrailer(hash.digest()), options_.stall).isOk()) return false;
  if (metrics_) metrics_->sent(peer, sent, secondsSince(start));
  return true;
}

Status TransferServer::sendChunk(int connection, const PeerChunk& chunk) {
  if (options_.flipByteForTests) {
    std::string bytes = chunk.bytes ? *chunk.bytes : std::string(chunk.size, '\0');
    if (!chunk.bytes && ::pread(chunk.file.get(), bytes.data(), bytes.size(), 0) != chunk.size)
      return corruption("cannot read the chunk's file");
    if (!bytes.empty()) bytes[bytes.size() / 2] ^= 0x5a;
    return sendAll(connection, bytes, options_.stall);
  }
  if (!chunk.file) return sendAll(connection, *chunk.bytes, options_.stall);
  ::posix_fadvise(chunk.file.get(), 0, chunk.size, POSIX_FADV_SEQUENTIAL);
  return sendFileRange(connection, chunk.file.get(), 0, chunk.size, options_.stall);
}

}  // namespace granary::cache::transfer
