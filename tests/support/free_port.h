// A TCP port on loopback for a test's server to listen on.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>
#include <set>
#include <string>

namespace granary::testing {

// A TCP port on loopback that was free a moment ago, that no earlier call in this process handed
// out, and that no other process running these tests holds (the kernel may pick a port just
// closed again, in this process or in a test beside it, and servers that bind with SO_REUSEPORT,
// as gRPC does, would then share it). A port is held by a lock on a file under
// /tmp/granary-test-ports until this process ends.
inline int freePort() {
  static std::mutex mutex;
  static std::set<int> handedOut;
  ::mkdir("/tmp/granary-test-ports", 0777);
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
    if (handedOut.contains(port)) continue;
    const std::string held = "/tmp/granary-test-ports/" + std::to_string(port);
    const int holder = ::open(held.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (holder >= 0 && ::flock(holder, LOCK_EX | LOCK_NB) != 0) {
      ::close(holder);  // another test process holds it
      continue;
    }
    handedOut.insert(port);  // the lock (if the file could be made) lasts as long as the process
    return port;
  }
}

}  // namespace granary::testing
