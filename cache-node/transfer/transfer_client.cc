#include "cache-node/transfer/transfer_client.h"

#include <sys/socket.h>

#include <chrono>
#include <utility>

#include "cache-node/transfer/arrival_check.h"
#include "cache-node/transfer/file_stream.h"
#include "cache-node/transfer/socket_io.h"
#include "common/log.h"

namespace granary::cache::transfer {
namespace {

const Logger& log() {
  static const Logger logger("transfer");
  return logger;
}

bool isStall(const Status& error) { return error.message().find("stalled") != std::string::npos; }

std::string keyOf(const Endpoint& peer) { return peer.host + ":" + std::to_string(peer.port); }

std::string chunkName(const ChunkRequest& request) {
  return "chunk " + std::to_string(request.index) + " of " + request.path;
}

}  // namespace

TransferClient::TransferClient(TransferClientOptions options, TransferMetrics* metrics)
    : options_(std::move(options)), metrics_(metrics) {}

Result<std::string> TransferClient::readChunk(const Endpoint& peer, const ChunkRequest& request,
                                              std::stop_token stop, std::string buffer) {
  const Status read = exchange(peer, stop, [&](int connection, Exchange& state) {
    return transfer(connection, peer, request, stop, state, buffer);
  });
  GRANARY_RETURN_IF_ERROR(read);
  return buffer;
}

Status TransferClient::exchange(const Endpoint& peer, std::stop_token stop,
                                const std::function<Status(int, Exchange&)>& op) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    auto lease = acquire(peer, stop);
    if (!lease.isOk()) {
      countFailure(peer, lease.status());
      return lease.status();
    }
    Exchange state;
    const Status done = op(lease->connection.get(), state);
    release(peer, std::move(lease->connection), state.inSync);
    // A connection kept idle may have been closed by the peer meanwhile (its idle timeout, a
    // restart), and so may the others kept with it: one that ends before any reply is tried
    // again on a fresh one.
    if (!done.isOk() && lease->reused && !state.anyReply &&
        done.code() == StatusCode::kUnavailable && !isStall(done)) {
      dropIdle(peer);
      continue;
    }
    if (!done.isOk()) {
      countFailure(peer, done);
      return done;
    }
    if (metrics_) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (state.received > 0) metrics_->received(peer.node, state.received, seconds);
      if (state.sent > 0) metrics_->sent(peer.node, state.sent, seconds);
    }
    return done;
  }
}

Status TransferClient::putFile(const Endpoint& peer, const std::string& header, int fd,
                               int64_t size, const std::function<bool(int64_t)>& pace) {
  return exchange(peer, {}, [&](int connection, Exchange& state) -> Status {
    const FileTransfer put{.put = true, .message = header, .length = size};
    GRANARY_RETURN_IF_ERROR(sendAll(connection, encodeFileTransfer(put), options_.stall, true));
    Xxh3Stream hash;
    // A failure cuts the connection mid-file: it is not reused, and the peer places nothing.
    GRANARY_RETURN_IF_ERROR(sendFileBytes(connection, fd, size, options_.stall, pace, hash));
    if (size > 0 && !pace(0)) return cancelled("the file changed while it was copied");
    GRANARY_RETURN_IF_ERROR(sendAll(connection, encodeTrailer(hash.digest()), options_.stall));
    GRANARY_ASSIGN_OR_RETURN(const std::string frame, receiveFrame(connection, options_.stall));
    state.anyReply = true;
    GRANARY_ASSIGN_OR_RETURN(const Reply reply, decodeReply(frame));
    state.inSync = true;
    if (reply.status.isOk()) state.sent = size;
    return reply.status;
  });
}

Status TransferClient::readFile(const Endpoint& peer, const std::string& request, int64_t size,
                                int fd, const std::function<void(int64_t)>& arrived) {
  return exchange(peer, {}, [&](int connection, Exchange& state) -> Status {
    const FileTransfer read{.message = request, .length = size};
    GRANARY_RETURN_IF_ERROR(sendAll(connection, encodeFileTransfer(read), options_.stall));
    auto frame = receiveFrame(connection, options_.stall);
    if (!frame.isOk() && frame.status().code() == StatusCode::kNotFound)
      return unavailable("the peer closed the connection");
    GRANARY_RETURN_IF_ERROR(frame.status());
    state.anyReply = true;
    GRANARY_ASSIGN_OR_RETURN(const Reply reply, decodeReply(*frame));
    if (!reply.status.isOk()) {
      state.inSync = true;
      return reply.status;
    }
    if (reply.length != size)
      return invalidArgument("a file of " + std::to_string(reply.length) + " bytes, not " +
                             std::to_string(size));
    Xxh3Stream hash;
    GRANARY_RETURN_IF_ERROR(receiveFileBytes(connection, fd, size, options_.stall, hash, arrived));
    GRANARY_ASSIGN_OR_RETURN(const std::string trailer, receiveFrame(connection, options_.stall));
    GRANARY_ASSIGN_OR_RETURN(const uint64_t sent, decodeTrailer(trailer));
    state.inSync = true;
    if (sent != hash.digest())
      return corruption("a checkpoint file from " + peer.node + " failed its checksum");
    state.received = size;
    return Status::ok();
  });
}

Status TransferClient::transfer(int connection, const Endpoint& peer, const ChunkRequest& request,
                                std::stop_token stop, Exchange& state, std::string& data) {
  // A stop shuts the socket down, which wakes any wait on it at once.
  std::stop_callback onStop(stop, [connection] { ::shutdown(connection, SHUT_RDWR); });
  GRANARY_RETURN_IF_ERROR(sendAll(connection, encodeRequest(request), options_.stall));
  auto frame = receiveFrame(connection, options_.stall);
  if (!frame.isOk() && frame.status().code() == StatusCode::kNotFound)
    return unavailable("the peer closed the connection");
  GRANARY_RETURN_IF_ERROR(frame.status());
  state.anyReply = true;
  GRANARY_ASSIGN_OR_RETURN(Reply reply, decodeReply(*frame));
  if (!reply.status.isOk()) {
    state.inSync = true;
    return reply.status;
  }
  if (!ArrivalCheck::fits(reply.checksums, reply.length) ||
      (request.length > 0 && reply.length != request.length)) {
    return invalidArgument("a reply of " + std::to_string(reply.length) + " bytes with " +
                           std::to_string(reply.checksums.size()) + " checksums for " +
                           chunkName(request) + " of " + std::to_string(request.length));
  }
  data.resize(static_cast<size_t>(reply.length));  // no byte zeroed in a buffer of this size
  ArrivalCheck check(std::move(reply.checksums), reply.length);
  const Status received =
      receiveExactly(connection, data.data(), reply.length, options_.stall,
                     [&](int64_t arrived) { return check.advance(data.data(), arrived); });
  if (stop.stop_requested()) return cancelled("the transfer of " + chunkName(request) + " stopped");
  if (!check.advance(data.data(), received.isOk() ? reply.length : 0) || !received.isOk()) {
    if (received.isOk() || received.code() == StatusCode::kCancelled) {
      return corruption(chunkName(request) + " from " + peer.node +
                        " does not match the checksums its disk recorded");
    }
    return received;
  }
  state.inSync = true;
  state.received = reply.length;
  return Status::ok();
}

Result<TransferClient::Lease> TransferClient::acquire(const Endpoint& peer, std::stop_token stop) {
  const std::string key = keyOf(peer);
  {
    MutexLock lock(mutex_);
    Pool& pool = pools_[key];
    const bool ready = returned_.wait(lock, stop, [&]() GRANARY_REQUIRES(mutex_) {
      return !pool.idle.empty() || pool.open < options_.connectionsPerPeer;
    });
    if (!ready) return cancelled("stopped while waiting for a connection to " + peer.node);
    if (!pool.idle.empty()) {
      Lease lease{std::move(pool.idle.back()), /*reused=*/true};
      pool.idle.pop_back();
      return lease;
    }
    ++pool.open;
  }
  auto connected = connect(peer);
  if (!connected.isOk()) {
    release(peer, OwnedFd(), /*reusable=*/false);
    return connected.status();
  }
  if (metrics_) metrics_->connections("out", +1);
  return Lease{std::move(*connected), /*reused=*/false};
}

void TransferClient::dropIdle(const Endpoint& peer) {
  MutexLock lock(mutex_);
  Pool& pool = pools_[keyOf(peer)];
  if (metrics_) metrics_->connections("out", -static_cast<int>(pool.idle.size()));
  pool.open -= static_cast<int>(pool.idle.size());
  pool.idle.clear();
  returned_.notify_all();
}

void TransferClient::release(const Endpoint& peer, OwnedFd connection, bool reusable) {
  if (connection && !reusable && metrics_) metrics_->connections("out", -1);
  MutexLock lock(mutex_);
  Pool& pool = pools_[keyOf(peer)];
  if (connection && reusable) {
    pool.idle.push_back(std::move(connection));
  } else {
    --pool.open;
  }
  returned_.notify_all();
}

Result<OwnedFd> TransferClient::connect(const Endpoint& peer) {
  auto connected = connectTcp(peer.host, peer.port, options_.connectTimeout);
  if (!connected.isOk())
    return unavailable("connect: " + peer.node + ": " + connected.status().message());
  const int socket = connected->get();
  const Hello hello{.token = options_.token.reveal(), .node = options_.nodeName};
  GRANARY_RETURN_IF_ERROR(sendAll(socket, encodeHello(hello), options_.stall));
  GRANARY_ASSIGN_OR_RETURN(const std::string frame, receiveFrame(socket, options_.stall));
  GRANARY_ASSIGN_OR_RETURN(const Reply reply, decodeReply(frame));
  if (!reply.status.isOk())
    return Status(reply.status.code(),
                  peer.node + " refused the data plane: " + reply.status.message());
  return std::move(*connected);
}

void TransferClient::countFailure(const Endpoint& peer, const Status& error) {
  FailureCause cause = FailureCause::kRefused;
  switch (error.code()) {
    case StatusCode::kCancelled:
      return;  // this node stopped, not the peer
    case StatusCode::kCorruption:
      cause = FailureCause::kChecksum;
      break;
    case StatusCode::kUnauthenticated:
      cause = FailureCause::kUnauthenticated;
      break;
    case StatusCode::kInvalidArgument:
      cause = FailureCause::kProtocol;
      break;
    case StatusCode::kUnavailable:
      cause = error.message().starts_with("connect:") ? FailureCause::kConnect
              : isStall(error)                        ? FailureCause::kStalled
                                                      : FailureCause::kClosed;
      break;
    case StatusCode::kNotFound:
    case StatusCode::kFailedPrecondition:
      return;  // an answer, not a failure of the peer
    default:
      break;
  }
  if (metrics_) metrics_->failed(peer.node, cause);
  log().warn("a chunk from a peer failed; reading it elsewhere",
             {{"peer", peer.node}, {"cause", causeName(cause)}, {"error", error.message()}});
}

}  // namespace granary::cache::transfer
