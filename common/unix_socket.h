// Local messages between granary's processes on one node: SOCK_SEQPACKET unix sockets whose
// messages may carry one file descriptor each (SCM_RIGHTS). The mount keeper and the hand-over
// between two cache-node processes of one node speak over them.
//
// A socket file is made mode 0600 in a directory made mode 0700: only its owner (root, in a pod)
// reaches it. Who may ask what is for each protocol to check (a token in its requests).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/owned_fd.h"
#include "common/result.h"
#include "common/secret.h"

namespace granary::unix_socket {

// The largest message received; a longer one is cut (AF_UNIX sends up to ~200 KiB at once).
inline constexpr size_t kMaxMessage = 256 << 10;

// Listens at `path`, replacing a stale socket file there. Unavailable when it cannot;
// InvalidArgument for a path too long for a unix socket (108 bytes).
Result<OwnedFd> listenAt(const std::filesystem::path& path);
// Connects to `path`, with `timeout` on every later send and receive. Unavailable when no one
// listens there.
Result<OwnedFd> connectTo(const std::filesystem::path& path, std::chrono::milliseconds timeout);
// Accepts one connection (-1 when none is waiting), with `timeout` on its sends and receives.
OwnedFd acceptFrom(int listener, std::chrono::milliseconds timeout);

// One message, with `fd` attached when it is >= 0. False when it could not be sent whole.
bool sendMessage(int socket, std::string_view text, int fd = -1);
// One message and the descriptor it carries (none: -1). False at the end of the connection, on
// an error or after the socket's timeout.
bool receiveMessage(int socket, std::string& text, OwnedFd& fd);

// Requests of granary's local protocols read "PROTOCOL TOKEN VERB": which protocol, the node's
// token, and what is asked.
std::string requestOf(std::string_view protocol, const Secret& token, std::string_view verb);
// The verb of `request`, or the answer to refuse it with as the error's message: InvalidArgument
// for another protocol (the answer names the one spoken here), Unauthenticated for a wrong token.
Result<std::string> verbOf(std::string_view request, std::string_view protocol,
                           const Secret& token);

}  // namespace granary::unix_socket
