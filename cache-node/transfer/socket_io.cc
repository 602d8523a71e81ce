#include "cache-node/transfer/socket_io.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>

#include "cache-node/transfer/frame.h"
#include "common/errno_status.h"

namespace granary::cache::transfer {
namespace {

// Waits until `socket` is ready for `events`; false after `stall` without.
bool await(int socket, short events, std::chrono::milliseconds stall) {
  pollfd ready{.fd = socket, .events = events, .revents = 0};
  while (true) {
    const int n = ::poll(&ready, 1, static_cast<int>(stall.count()));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // the next call reports the error
  }
}

constexpr int64_t kReceivePiece = 256 << 10;

Status stalled(std::string_view what, std::chrono::milliseconds stall) {
  return unavailable(std::string(what) + ": the peer stalled for " + std::to_string(stall.count()) +
                     " ms");
}

Result<addrinfo*> resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int failed =
      ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (failed != 0) return unavailable("cannot resolve " + host + ": " + ::gai_strerror(failed));
  return found;
}

}  // namespace

Result<std::pair<std::string, int>> splitHostPort(const std::string& address,
                                                  std::string_view field) {
  const auto colon = address.rfind(':');
  const auto bad = [&] {
    return invalidArgument(std::string(field) + ": \"" + address +
                           "\" is not host:port (for example 0.0.0.0:7401)");
  };
  if (colon == std::string::npos || colon + 1 == address.size()) return bad();
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = 0;
  for (const char c : address.substr(colon + 1)) {
    if (c < '0' || c > '9' || port > 65535) return bad();
    port = port * 10 + (c - '0');
  }
  if (port > 65535) return bad();
  return std::pair{host, port};
}

Result<OwnedFd> listenTcp(const std::string& address) {
  GRANARY_ASSIGN_OR_RETURN(const auto hostPort, splitHostPort(address, "transferListen"));
  GRANARY_ASSIGN_OR_RETURN(addrinfo* const found,
                           resolve(hostPort.first, hostPort.second, /*passive=*/true));
  Status last = unavailable("no address to listen on for " + address);
  OwnedFd listener;
  for (const addrinfo* a = found; a != nullptr && !listener; a = a->ai_next) {
    OwnedFd candidate(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    // SO_REUSEPORT as gRPC sets it, on a port asked for: a pod replacing this node's (a
    // hand-over, with the host's network) listens beside it until it goes. A port the kernel
    // picks is never shared: another listener (this node's gRPC port, say) cannot take it too.
    const int yes = 1;
    if (candidate) {
      ::setsockopt(candidate.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      if (hostPort.second != 0)
        ::setsockopt(candidate.get(), SOL_SOCKET, SO_REUSEPORT, &yes, sizeof yes);
    }
    if (!candidate || ::bind(candidate.get(), a->ai_addr, a->ai_addrlen) != 0 ||
        ::listen(candidate.get(), 1024) != 0) {
      last = errnoStatus(errno, "cannot listen on " + address);
      continue;
    }
    listener = std::move(candidate);
  }
  ::freeaddrinfo(found);
  if (!listener) return last;
  return listener;
}

int boundPort(int listener) {
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (::getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return 0;
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
}

Result<OwnedFd> connectTcp(const std::string& host, int port, std::chrono::milliseconds timeout) {
  GRANARY_ASSIGN_OR_RETURN(addrinfo* const found, resolve(host, port, /*passive=*/false));
  const std::string where = host + ":" + std::to_string(port);
  Status last = unavailable("cannot connect to " + where);
  OwnedFd connected;
  for (const addrinfo* a = found; a != nullptr && !connected; a = a->ai_next) {
    OwnedFd socket(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!socket) continue;
    if (::connect(socket.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = errnoStatus(errno, "cannot connect to " + where);
      continue;
    }
    int error = 0;
    socklen_t length = sizeof error;
    if (!await(socket.get(), POLLOUT, timeout)) {
      last = unavailable("cannot connect to " + where + ": no answer in " +
                         std::to_string(timeout.count()) + " ms");
      continue;
    }
    ::getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      last = errnoStatus(error, "cannot connect to " + where);
      continue;
    }
    ::fcntl(socket.get(), F_SETFL, ::fcntl(socket.get(), F_GETFL) & ~O_NONBLOCK);
    const int yes = 1;
    ::setsockopt(socket.get(), IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    connected = std::move(socket);
  }
  ::freeaddrinfo(found);
  if (!connected) return last;
  return connected;
}

void setSendTimeout(int socket, std::chrono::milliseconds stall) {
  const timeval timeout{.tv_sec = static_cast<time_t>(stall.count() / 1000),
                        .tv_usec = static_cast<suseconds_t>(stall.count() % 1000 * 1000)};
  ::setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

std::string peerAddressOf(int socket) {
  sockaddr_storage far{};
  socklen_t length = sizeof far;
  if (::getpeername(socket, reinterpret_cast<sockaddr*>(&far), &length) != 0) return "?";
  char text[INET6_ADDRSTRLEN] = {};
  if (far.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<sockaddr_in6&>(far);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(v6.sin6_port));
  }
  const auto& v4 = reinterpret_cast<sockaddr_in&>(far);
  ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(v4.sin_port));
}

// Each call tries the socket first and waits (poll) only when it would block: on a fast link most
// sends and receives need no wait, and a wait is a system call of its own.
Status sendAll(int socket, std::string_view data, std::chrono::milliseconds stall, bool more) {
  while (!data.empty()) {
    const ssize_t n = ::send(socket, data.data(), data.size(),
                             MSG_NOSIGNAL | MSG_DONTWAIT | (more ? MSG_MORE : 0));
    if (n < 0 && errno == EAGAIN && !await(socket, POLLOUT, stall)) return stalled("send", stall);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return errnoStatus(errno, "send");
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::ok();
}

Status sendFileRange(int socket, int file, int64_t offset, int64_t length,
                     std::chrono::milliseconds stall) {
  off_t at = offset;
  const off_t end = offset + length;
  while (at < end) {
    if (!await(socket, POLLOUT, stall)) return stalled("sendfile", stall);
    const ssize_t n = ::sendfile(socket, file, &at, static_cast<size_t>(end - at));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return errnoStatus(errno, "sendfile");
    if (n == 0) return corruption("the chunk's file ended before its recorded size");
  }
  return Status::ok();
}

Status receiveExactly(int socket, char* into, int64_t length, std::chrono::milliseconds stall,
                      const std::function<bool(int64_t)>& arrived) {
  int64_t done = 0;
  while (done < length) {
    // At most kReceivePiece at a time: what `arrived` checks is still in the CPU's cache.
    const ssize_t n =
        ::recv(socket, into + done, static_cast<size_t>(std::min(length - done, kReceivePiece)),
               MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN && !await(socket, POLLIN, stall)) return stalled("receive", stall);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return errnoStatus(errno, "receive");
    if (n == 0) {
      return unavailable("the peer closed the connection after " + std::to_string(done) + " of " +
                         std::to_string(length) + " bytes");
    }
    done += n;
    if (arrived && !arrived(done)) return cancelled("the receiver stopped");
  }
  return Status::ok();
}

Result<std::string> receiveFrame(int socket, std::chrono::milliseconds stall) {
  char header[4];
  ssize_t first = ::recv(socket, header, 1, MSG_DONTWAIT);
  if (first < 0 && (errno == EAGAIN || errno == EINTR)) {
    if (!await(socket, POLLIN, stall)) return stalled("receive", stall);
    first = ::recv(socket, header, 1, 0);
  }
  if (first == 0) return notFound("the connection closed");
  if (first < 0) return errnoStatus(errno, "receive");
  GRANARY_RETURN_IF_ERROR(receiveExactly(socket, header + 1, 3, stall));
  GRANARY_ASSIGN_OR_RETURN(const uint32_t length,
                           decodeFrameLength(std::string_view(header, sizeof header)));
  std::string body(length, '\0');
  GRANARY_RETURN_IF_ERROR(receiveExactly(socket, body.data(), length, stall));
  return body;
}

}  // namespace granary::cache::transfer
