// TCP for the peer data plane: listen, connect, and move whole frames and byte runs with a bound on
// how long the far end may stall. A thin adapter: each call maps errno to Status and holds no
// state. Sends never raise SIGPIPE (a peer that left is an error, not a signal).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/owned_fd.h"
#include "common/result.h"

namespace granary::cache::transfer {

// Splits "host:port" ("[v6]:port" too). InvalidArgument naming `field` when it is not one.
Result<std::pair<std::string, int>> splitHostPort(const std::string& address,
                                                  std::string_view field);

// Listens on "host:port" (port 0: a free one, see boundPort), with SO_REUSEPORT so that a
// replacing process may listen beside this one. Unavailable when it cannot bind.
Result<OwnedFd> listenTcp(const std::string& address);
int boundPort(int listener);

// Connects to `host`:`port` within `timeout`, TCP_NODELAY set. Unavailable when no one answers.
Result<OwnedFd> connectTcp(const std::string& host, int port, std::chrono::milliseconds timeout);

// Bounds a blocking send (sendfile's) that the far end does not drain to `stall`.
void setSendTimeout(int socket, std::chrono::milliseconds stall);

// The far end's address, "ip:port", for logs.
std::string peerAddressOf(int socket);

// Sends all of `data` (`more`: further bytes follow at once, so the kernel may coalesce them).
// Unavailable when the far end left or did not take a byte for `stall`.
Status sendAll(int socket, std::string_view data, std::chrono::milliseconds stall,
               bool more = false);
// Sends `length` bytes of `file` from `offset`, from the page cache to the socket without a copy
// through this process (sendfile). Unavailable as sendAll; Corruption when the file is shorter.
Status sendFileRange(int socket, int file, int64_t offset, int64_t length,
                     std::chrono::milliseconds stall);

// Receives exactly `length` bytes into `into`, calling `arrived` with the count so far after each
// piece. Unavailable when the far end closes first or sends nothing for `stall`; Cancelled when
// `arrived` returns false.
Status receiveExactly(int socket, char* into, int64_t length, std::chrono::milliseconds stall,
                      const std::function<bool(int64_t)>& arrived = {});
// One frame's body (transfer::decodeFrameLength). Unavailable as receiveExactly; NotFound when the
// far end closed the connection cleanly before the frame began; InvalidArgument for a bad length.
Result<std::string> receiveFrame(int socket, std::chrono::milliseconds stall);

}  // namespace granary::cache::transfer
