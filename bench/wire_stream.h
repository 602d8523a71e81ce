// The raw wire to a loopback address, as the benches' baseline for bytes that cross
// between cache nodes: files sent with sendfile over one plain TCP connection, received into
// memory, or into a file that is then fsync'd (the same disk writes a copy to a peer makes).
#pragma once

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_data.h"
#include "cache-node/transfer/socket_io.h"
#include "common/owned_fd.h"

namespace granary::bench {

struct StreamFigures {
  double seconds = 0;
  int64_t bytes = 0;
  double mibPerSecond() const { return mib(bytes) / seconds; }
};

// Sends `files` from a listener on `host` to a connection to it, received into memory or, with
// `into`, written to that file and fsync'd; exits the bench when the stream fails.
inline StreamFigures streamFiles(const std::vector<fs::path>& files, const std::string& host,
                                 const fs::path& into = {}) {
  const auto die = [](const std::string& what) {
    std::fprintf(stderr, "wire: %s\n", what.c_str());
    std::exit(1);
  };
  auto listener = cache::transfer::listenTcp(host + ":0");
  if (!listener.isOk()) die("listen: " + listener.status().message());
  const int port = cache::transfer::boundPort(listener->get());
  std::thread sender([&] {
    OwnedFd connection(::accept(listener->get(), nullptr, nullptr));
    for (const auto& path : files) {
      OwnedFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      const auto size = static_cast<int64_t>(fs::file_size(path));
      if (!cache::transfer::sendFileRange(connection.get(), file.get(), 0, size,
                                          std::chrono::seconds(30))
               .isOk())
        die("sendfile of " + path.string() + " failed");
    }
  });
  const auto start = Clock_::now();
  auto connection = cache::transfer::connectTcp(host, port, std::chrono::seconds(5));
  if (!connection.isOk()) die("connect: " + connection.status().message());
  OwnedFd out;
  if (!into.empty())
    out = OwnedFd(::open(into.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  std::vector<char> buffer(1 << 20);
  int64_t received = 0;
  for (ssize_t n; (n = ::recv(connection->get(), buffer.data(), buffer.size(), 0)) > 0;) {
    if (out && ::write(out.get(), buffer.data(), static_cast<size_t>(n)) != n)
      die("cannot write " + into.string());
    received += n;  // until the sender closes, after the last file
  }
  if (out) ::fsync(out.get());
  const double elapsed = seconds(start);
  sender.join();
  if (!into.empty()) fs::remove(into);
  return {elapsed, received};
}

}  // namespace granary::bench
