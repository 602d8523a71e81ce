#include "common/unix_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

namespace granary::unix_socket {

namespace {

Result<sockaddr_un> addressOf(const std::filesystem::path& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.string().size() >= sizeof address.sun_path)
    return invalidArgument(path.string() + " is too long for a unix socket (" +
                           std::to_string(sizeof address.sun_path - 1) +
                           " bytes at most); use a shorter path");
  std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
  return address;
}

void setTimeout(int socket, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  ::setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace

Result<OwnedFd> listenAt(const std::filesystem::path& path) {
  GRANARY_ASSIGN_OR_RETURN(const sockaddr_un address, addressOf(path));
  if (::mkdir(path.parent_path().c_str(), 0700) != 0 && errno != EEXIST) {
    std::error_code error;
    std::filesystem::create_directories(path.parent_path(), error);
  }
  ::unlink(path.c_str());
  OwnedFd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (listener.get() < 0 ||
      ::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::chmod(path.c_str(), 0600) != 0 || ::listen(listener.get(), 16) != 0)
    return unavailable("cannot listen on " + path.string() + ": " + std::strerror(errno));
  return listener;
}

Result<OwnedFd> connectTo(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  GRANARY_ASSIGN_OR_RETURN(const sockaddr_un address, addressOf(path));
  OwnedFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (socket.get() < 0 ||
      ::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    return unavailable("cannot reach " + path.string() + ": " + std::strerror(errno));
  setTimeout(socket.get(), timeout);
  return socket;
}

OwnedFd acceptFrom(int listener, std::chrono::milliseconds timeout) {
  OwnedFd connection(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (connection.get() >= 0) setTimeout(connection.get(), timeout);
  return connection;
}

bool sendMessage(int socket, std::string_view text, int fd) {
  iovec part{const_cast<char*>(text.data()), text.size()};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
  }
  return ::sendmsg(socket, &message, MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

bool receiveMessage(int socket, std::string& text, OwnedFd& fd) {
  text.assign(kMaxMessage, '\0');
  iovec part{text.data(), text.size()};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const ssize_t got = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  if (got <= 0) return false;
  text.resize(static_cast<size_t>(got));
  fd = OwnedFd();
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      int received;
      std::memcpy(&received, CMSG_DATA(header), sizeof received);
      fd = OwnedFd(received);
    }
  }
  return true;
}

std::string requestOf(std::string_view protocol, const Secret& token, std::string_view verb) {
  return std::string(protocol) + " " + token.reveal() + " " + std::string(verb);
}

Result<std::string> verbOf(std::string_view request, std::string_view protocol,
                           const Secret& token) {
  const std::string prefix = std::string(protocol) + " ";
  if (!request.starts_with(prefix))
    return invalidArgument("unknown request: this side speaks " + std::string(protocol));
  const size_t tokenEnd = request.find(' ', prefix.size());
  if (tokenEnd == std::string_view::npos ||
      !token.matches(request.substr(prefix.size(), tokenEnd - prefix.size())))
    return Status(StatusCode::kUnauthenticated, "refused: wrong token");
  return std::string(request.substr(tokenEnd + 1));
}

}  // namespace granary::unix_socket
