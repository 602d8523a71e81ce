// A TCP port on loopback for a test's server to listen on.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <set>

namespace granary::testing {

// A TCP port on loopback that was free a moment ago, and that no earlier call in this process
// handed out (the kernel may pick a port just closed again).
inline int freePort() {
  static std::mutex mutex;
  static std::set<int> handedOut;
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
    socklen_t length = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    ::close(fd);
    const int port = ntohs(address.sin_port);
    std::lock_guard lock(mutex);
    if (handedOut.insert(port).second) return port;
  }
}

}  // namespace granary::testing
