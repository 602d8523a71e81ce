// Keeps dataset mounts alive while granary-cache-node restarts.
//
// A FUSE mount lives as long as some process holds its /dev/fuse descriptor. The cache node hands
// each dataset mount's descriptor to the keeper, a process of its own (on Kubernetes a second
// container of the cache node's pod), over a unix socket with SCM_RIGHTS. While no cache node
// runs, the kernel keeps the mount and queues its readers' requests; the next cache node takes
// the descriptors back and answers them, so readers wait instead of failing.
//
// The socket is node-scoped (under the state directory, a hostPath in a pod), so that a new pod's
// keeper reaches the old pod's: it takes over the descriptors the old one holds (the old one stops
// listening and holds its copies until it stops), and the mounts outlive the old pod.
//
// Protocol granary-keeper/2: a SOCK_SEQPACKET socket (common/unix_socket.h), one request and its
// answer per connection; each request starts with the protocol and the node's token, and one with
// a wrong token is refused, so that no other process can take or inject a FUSE connection. KEY is
// the mount point.
//   "granary-keeper/2 TOKEN keep KEY" with a descriptor -> "ok"  (replaces one kept under KEY)
//   "granary-keeper/2 TOKEN drop KEY"                   -> "ok"
//   "granary-keeper/2 TOKEN list"     -> "fd KEY" with its descriptor for each one kept, then "end"
//   "granary-keeper/2 TOKEN handover" -> as list, but "listener" with the listening socket before
//                                        "end": the successor accepts on it from then on (no
//                                        moment without a keeper), and this keeper keeps its
//                                        copies of the descriptors until it stops
// Anything else is answered with a line saying what this side speaks; the first keeper
// (granary-keeper/1, no protocol and no token in its requests) answers "unknown request".
// The keeper closes a descriptor by itself once its connection has ended (the mount is gone).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "common/owned_fd.h"
#include "common/result.h"
#include "common/secret.h"

namespace granary::cache {

inline constexpr std::string_view kKeeperProtocol = "granary-keeper/2";

// The keeper process's side.
class MountKeeper {
 public:
  // Listens on `socketPath`, answering requests that carry `token`. Where a keeper listens there
  // already (the pod being replaced), first takes over what it keeps; one of an older protocol
  // keeps its mounts (they end with it), which is logged. Unavailable when it cannot listen.
  static Result<std::unique_ptr<MountKeeper>> listen(const std::filesystem::path& socketPath,
                                                     Secret token);
  // Closes what it keeps: the mounts whose descriptors no one else holds end.
  ~MountKeeper();

  // Answers requests until `stop` is requested.
  void serve(std::stop_token stop);

 private:
  MountKeeper() = default;
  void answer(int connection);
  void forgetEnded();
  void takeOver();  // from a keeper listening at socketPath_, before listening there

  std::filesystem::path socketPath_;
  Secret token_;
  OwnedFd listener_;                     // closed once handed over
  std::map<std::string, OwnedFd> kept_;  // by mount point
};

// The cache node's side: each call connects, asks and hangs up. Unavailable when the keeper
// cannot be reached or answers otherwise (a wrong token, an older protocol), saying which.
class KeeperClient {
 public:
  KeeperClient() = default;  // none: socket() is empty
  KeeperClient(std::filesystem::path socketPath, Secret token)
      : socketPath_(std::move(socketPath)), token_(std::move(token)) {}

  Status keep(const std::string& mountpoint, int fuseFd) const;
  Status drop(const std::string& mountpoint) const;
  Result<std::map<std::string, OwnedFd>> kept() const;
  // Whether a keeper listens at the socket.
  bool listening() const;
  const std::filesystem::path& socket() const { return socketPath_; }

 private:
  std::filesystem::path socketPath_;
  Secret token_;
};

// Whether this machine lets the keeper carry dataset mounts across a restart, tried at start on
// a scratch FUSE mount in `scratchDirectory` (created if missing, removed after): `device`
// (/dev/fuse) opens and mounts, which needs CAP_SYS_ADMIN; its descriptor passes over a unix
// socket (SCM_RIGHTS); and the kernel resends the requests a stopped process had read but not
// answered (FUSE_NOTIFY_RESEND, Linux 6.9+), without which a reader in the middle of a read when
// the node stops would wait forever instead of failing. OK, or FailedPrecondition saying which is
// missing and why. Takes milliseconds; touches nothing else.
Status checkMountRecovery(const std::filesystem::path& scratchDirectory,
                          const std::filesystem::path& device = "/dev/fuse");

}  // namespace granary::cache
