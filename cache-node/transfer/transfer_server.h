// The serving side of the peer data plane (frame.h says what travels): accepts TCP connections
// from other cache nodes, checks each one's token once, then answers its chunk requests in order,
// each with the chunk's recorded checksums and then its bytes, sent from the chunk's file to the
// socket by the kernel (sendfile) where the chunk is on disk. One thread per connection; the
// connections are bounded (a node past the bound is refused until one closes), and a peer that
// stops reading for the stall time loses its connection.
//
// Thread-safety: constructed and destroyed on one thread; serves on its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>

#include "cache-node/transfer/frame.h"
#include "cache-node/transfer/transfer_metrics.h"
#include "common/owned_fd.h"
#include "common/secret.h"
#include "common/thread_annotations.h"
#include "engine/dataset_cache.h"

namespace granary::cache::transfer {

// Where the bytes of a requested chunk come from (the cache node's engine).
class ChunkSource {
 public:
  virtual ~ChunkSource() = default;
  // The chunk as DatasetCache::openChunkForPeer gives it, or why not (sent to the requester).
  virtual Result<PeerChunk> open(const ChunkRequest& request) = 0;
};

// Where the checkpoint files peers put and read are (the node's checkpoint volumes).
class CheckpointFiles {
 public:
  virtual ~CheckpointFiles() = default;
  // Places the copy `header` (a serialized v1::CheckpointFilePiece) describes, whole or not at
  // all: `write` fills the file it is given (and fails the placing when it fails).
  virtual Status place(const std::string& header, const std::function<Status(int fd)>& write) = 0;
  // Hands the bytes of the file `request` (a serialized v1::ReadCheckpointFileRequest) names to
  // `each`, in order; FailedPrecondition when the tree holds another version of it.
  virtual Status read(const std::string& request,
                      const std::function<Status(std::string_view)>& each) = 0;
};

struct TransferServerOptions {
  std::string address;  // host:port; port 0 takes a free one (port())
  Secret token;         // the cluster's: every hello must carry it
  // How long a peer may stop sending a frame it began, or stop reading what is sent to it.
  std::chrono::milliseconds stall{30'000};
  // How long a connection may wait between requests before it is closed (the client reconnects).
  std::chrono::milliseconds idle{300'000};
  int maxConnections = 1024;
  // Test hook: each chunk is sent with one byte flipped, from memory (the receiver must refuse it).
  bool flipByteForTests = false;
};

class TransferServer {
 public:
  // Listens at once. `source`, `files` (null: checkpoint files are refused) and `metrics` (null:
  // not exported) outlive the server.
  static Result<std::unique_ptr<TransferServer>> start(TransferServerOptions options,
                                                       ChunkSource& source, CheckpointFiles* files,
                                                       TransferMetrics* metrics);
  // Stops accepting, ends every connection (a transfer in progress is cut) and waits for them.
  ~TransferServer();
  TransferServer(const TransferServer&) = delete;
  TransferServer& operator=(const TransferServer&) = delete;

  int port() const { return port_; }

 private:
  TransferServer(TransferServerOptions options, OwnedFd listener, ChunkSource& source,
                 CheckpointFiles* files, TransferMetrics* metrics);
  void acceptLoop(std::stop_token stop);
  // Serves one connection until it ends (the caller closes it).
  void serve(int connection);
  // The node `connection`'s hello names once it carried the token (its address when it names
  // none); nullopt when it did not (answered either way).
  std::optional<std::string> admit(int connection, const std::string& address);
  // Answers one request of `peer`; false when the connection can no longer be used.
  bool answer(int connection, const ChunkRequest& request, const std::string& peer);
  Status sendChunk(int connection, const PeerChunk& chunk);
  // A checkpoint file put or read; false when the connection can no longer be used.
  bool answerFile(int connection, const FileTransfer& transfer, const std::string& peer);
  bool receiveFile(int connection, const FileTransfer& put, const std::string& peer);
  bool sendFile(int connection, const FileTransfer& read, const std::string& peer);
  bool track(int connection) GRANARY_EXCLUDES(mutex_);
  void untrack(int connection) GRANARY_EXCLUDES(mutex_);

  const TransferServerOptions options_;
  OwnedFd listener_;
  const int port_;
  ChunkSource& source_;
  CheckpointFiles* const files_;
  TransferMetrics* const metrics_;

  Mutex mutex_;
  std::condition_variable_any allClosed_;  // waits on mutex_
  std::set<int> open_ GRANARY_GUARDED_BY(mutex_);
  bool stopping_ GRANARY_GUARDED_BY(mutex_) = false;
  std::jthread acceptor_;  // last: started once the rest is ready
};

}  // namespace granary::cache::transfer
