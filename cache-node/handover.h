// A node handed over from one granary-cache-node process to the next: the old pod's and the one
// replacing it, which a DaemonSet's surge rollout runs side by side for a moment on one node,
// sharing its state directory.
//
// The old process listens at a node-scoped socket (<stateDirectory>/handover.sock). The new one
// asks it, before opening the state, to release the node: the old one stops serving its API, the
// CSI plugin and its dataset mounts (leaving them mounted: the mount keeper holds their FUSE
// connections), closes the state (RocksDB's lock; warm writes end as at a stop), answers with the
// EnsureDataset requests it served (ensured_record.h), and from then on waits for its pod's end,
// not ready. The new process ensures them and adopts their mounts before it reports ready:
// readers pause meanwhile, and none fails.
//
// Protocol granary-handover/1, a SOCK_SEQPACKET socket (common/unix_socket.h):
//   "granary-handover/1 TOKEN release" -> "releasing"; then "ensure " + an EnsureDatasetRequest
//                                         (serialized) for each, in order; then "released"
// A request with a wrong token is refused; one of another protocol is answered with the one this
// process speaks. A process that does not listen (an older version) or answers otherwise is not
// handed the node: the new process goes on as at a first start and says why.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/owned_fd.h"
#include "common/result.h"
#include "common/secret.h"
#include "common/thread_annotations.h"

namespace granary::cache {

inline constexpr std::string_view kHandoverProtocol = "granary-handover/1";
// The socket's name in the state directory.
inline constexpr const char* kHandoverSocketName = "handover.sock";

// The old process's side. Thread-safety: every method may be called from any thread.
class HandoverListener {
 public:
  // How long a successor waits for the node to be released before it goes on without.
  static constexpr std::chrono::seconds kReleaseWait{120};

  // Listens at `socketPath` for a successor that has `token`; calls `onRequest` (on the
  // listener's thread) when one asks, once. Unavailable when it cannot listen.
  static Result<std::unique_ptr<HandoverListener>> listen(const std::filesystem::path& socketPath,
                                                          Secret token,
                                                          std::function<void()> onRequest);
  // Stops listening; a successor waiting for release() is answered that the node was not
  // released.
  ~HandoverListener();

  // Whether a successor asked for the node.
  bool requested() const;
  // Answers the successor: the requests to ensure again once the node is released (its state
  // closed), or an error when it could not be.
  void release(Result<std::vector<std::string>> ensured);

 private:
  HandoverListener() = default;
  void serve(std::stop_token stop);
  // Answers one request; a release waits for release() (or `stop`).
  void answer(int connection, std::stop_token stop);

  std::filesystem::path socketPath_;
  Secret token_;
  OwnedFd listener_;
  std::function<void()> onRequest_;
  mutable Mutex mutex_;
  std::condition_variable_any released_;  // waits on mutex_
  bool requested_ GRANARY_GUARDED_BY(mutex_) = false;
  std::optional<Result<std::vector<std::string>>> answer_ GRANARY_GUARDED_BY(mutex_);
  std::jthread thread_;
};

// The new process's side, before it opens the state: asks a process listening at `socketPath`
// to release the node. The requests to ensure again; nullopt when no process listens there (a
// first start, or the old one was killed). Unavailable when one answered but did not release the
// node (another protocol, another token, or it ended mid-way): the caller goes on without.
Result<std::optional<std::vector<std::string>>> takeOverNode(
    const std::filesystem::path& socketPath, const Secret& token);

// Whether another process holds the state directory's manifest store (RocksDB's lock): an older
// cache node that does not hand over still runs.
bool stateHeldElsewhere(const std::filesystem::path& stateDirectory);

}  // namespace granary::cache
