// The reading side of the peer data plane (frame.h says what travels): keeps up to
// connectionsPerPeer connections open to each peer, each authenticated once with the cluster's
// token, and reads a chunk over one of them at a time, straight into the buffer it returns,
// checking each 64 KiB block against the checksums the sender's disk recorded as it arrives. A
// caller past the bound waits for a connection (backpressure: a node never has more transfers in
// flight to one peer than connections to it).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <stop_token>
#include <string>
#include <vector>

#include "cache-node/transfer/frame.h"
#include "cache-node/transfer/transfer_metrics.h"
#include "common/owned_fd.h"
#include "common/secret.h"
#include "common/thread_annotations.h"

namespace granary::cache::transfer {

struct TransferClientOptions {
  Secret token;          // the cluster's, sent in each connection's hello
  std::string nodeName;  // this node, as the hello names it
  int connectionsPerPeer = 4;
  std::chrono::milliseconds connectTimeout{5'000};
  // How long a peer may stop sending a chunk it began (then the chunk comes from elsewhere).
  std::chrono::milliseconds stall{30'000};
};

// A peer's data plane: its node name (for metrics and errors) and where it listens.
struct Endpoint {
  std::string node;
  std::string host;
  int port = 0;
};

class TransferClient {
 public:
  // `metrics` (null: not exported) outlives the client.
  TransferClient(TransferClientOptions options, TransferMetrics* metrics);

  // `request.length` bytes of the chunk `request` names, from `peer`, every block checked.
  // What the peer answered when it refused (NotFound, FailedPrecondition, ...); Corruption when
  // a block failed its checksum; Unavailable when the peer cannot be reached (the message starts
  // "connect:"), stalls or leaves mid-chunk; Unauthenticated when it refused the token; Cancelled
  // once `stop` is requested (the connection is closed, which ends the sender's transfer). The
  // chunk arrives in `buffer` (its bytes overwritten, its memory used again).
  Result<std::string> readChunk(const Endpoint& peer, const ChunkRequest& request,
                                std::stop_token stop = {}, std::string buffer = {});

  // Checkpoint files (frame.h's file put and file read), hashed with XXH3 as they pass and
  // checked at the far end. putFile sends the `size` bytes of `fd` from offset 0 after `header`
  // (a serialized v1::CheckpointFilePiece), each piece paced by `pace` (false cancels; `pace(0)`
  // after the last says whether the file is unchanged), and returns what the peer answered once
  // it placed the copy. readFile writes the `size` bytes of the file `request` (a serialized
  // v1::ReadCheckpointFileRequest) names to `fd` from offset 0, telling `arrived` of each piece:
  // Corruption when they fail the sender's hash.
  Status putFile(const Endpoint& peer, const std::string& header, int fd, int64_t size,
                 const std::function<bool(int64_t)>& pace);
  Status readFile(const Endpoint& peer, const std::string& request, int64_t size, int fd,
                  const std::function<void(int64_t)>& arrived);

 private:
  struct Pool {
    std::vector<OwnedFd> idle;
    int open = 0;  // idle ones and those lent out
  };
  // What one exchange over a connection left: whether the connection may carry another, whether
  // any reply came (a reused connection that fails before one is tried again), the bytes moved.
  struct Exchange {
    bool inSync = false;
    bool anyReply = false;
    int64_t received = 0, sent = 0;
  };
  struct Lease {
    OwnedFd connection;
    bool reused = false;  // opened for an earlier transfer (the peer may have closed it since)
  };
  // An idle connection to `peer`, or a new one when fewer than connectionsPerPeer are open;
  // otherwise waits for one to come back.
  Result<Lease> acquire(const Endpoint& peer, std::stop_token stop) GRANARY_EXCLUDES(mutex_);
  // Returns a connection: kept for the next transfer when `reusable`, else closed.
  void release(const Endpoint& peer, OwnedFd connection, bool reusable) GRANARY_EXCLUDES(mutex_);
  // Closes the idle connections to `peer`.
  void dropIdle(const Endpoint& peer) GRANARY_EXCLUDES(mutex_);
  Result<OwnedFd> connect(const Endpoint& peer);
  // Runs `op` over a connection to `peer` (again on a fresh one when a reused one turns out
  // closed), counting its bytes or its failure.
  Status exchange(const Endpoint& peer, std::stop_token stop,
                  const std::function<Status(int connection, Exchange&)>& op);
  // One chunk request and its reply over `connection`, the chunk into `data`.
  Status transfer(int connection, const Endpoint& peer, const ChunkRequest& request,
                  std::stop_token stop, Exchange& state, std::string& data);
  void countFailure(const Endpoint& peer, const Status& error);

  const TransferClientOptions options_;
  TransferMetrics* const metrics_;
  Mutex mutex_;
  std::condition_variable_any returned_;  // waits on mutex_: a connection came back or closed
  std::map<std::string, Pool> pools_ GRANARY_GUARDED_BY(mutex_);  // by host:port
};

}  // namespace granary::cache::transfer
