// Keeps dataset mounts alive while granary-cache-node restarts.
//
// A FUSE mount lives as long as some process holds its /dev/fuse descriptor. The cache node hands
// each dataset mount's descriptor to the keeper, a process of its own (on Kubernetes a second
// container of the cache node's pod), over a unix socket with SCM_RIGHTS. While no cache node
// runs, the kernel keeps the mount and queues its readers' requests; the next cache node takes
// the descriptors back and answers them, so readers wait instead of failing.
//
// Protocol: a SOCK_SEQPACKET socket, one request and its answer per connection. KEY is the
// mount point.
//   "keep KEY" with a descriptor  -> "ok"     (replaces one kept under KEY)
//   "drop KEY"                    -> "ok"
//   "list"                        -> "fd KEY" with its descriptor for each one kept, then "end"
// The keeper closes a descriptor by itself once its connection has ended (the mount is gone).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <utility>

#include "common/owned_fd.h"
#include "common/result.h"

namespace granary::cache {

// The keeper process's side.
class MountKeeper {
 public:
  // Listens on `socketPath`, replacing a stale socket file. Unavailable when it cannot.
  static Result<std::unique_ptr<MountKeeper>> listen(const std::filesystem::path& socketPath);
  // Closes what it keeps: the mounts whose descriptors no one else holds end.
  ~MountKeeper();

  // Answers requests until `stop` is requested.
  void serve(std::stop_token stop);

 private:
  MountKeeper() = default;
  void answer(int connection);
  void forgetEnded();

  std::filesystem::path socketPath_;
  OwnedFd listener_;
  std::map<std::string, OwnedFd> kept_;  // by mount point
};

// The cache node's side: each call connects, asks and hangs up. Unavailable when the keeper
// cannot be reached or answers otherwise.
Status keepMount(const std::filesystem::path& socketPath, const std::string& mountpoint,
                 int fuseFd);
Status dropMount(const std::filesystem::path& socketPath, const std::string& mountpoint);
Result<std::map<std::string, OwnedFd>> keptMounts(const std::filesystem::path& socketPath);
// Whether a keeper listens at `socketPath`.
bool keeperListening(const std::filesystem::path& socketPath);

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
