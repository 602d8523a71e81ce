#include "cache-node/transfer/transfer_peers.h"

#include "cache-node/transfer/socket_io.h"

namespace granary::cache::transfer {
namespace {

// How long chunks of a node whose plane could not be reached go over gRPC.
constexpr std::chrono::seconds kPlaneRetry{30};
// How long a node that stalled or left mid-chunk is passed over (its chunks read elsewhere at
// once, not after a stall each).
constexpr std::chrono::seconds kPassOver{10};

// Whether `error` says the plane could not be reached at all (TransferClient's "connect:").
bool unreachable(const Status& error) { return error.message().starts_with("connect:"); }

}  // namespace

Result<std::string> TransferPeers::readChunk(const std::string& node, const DatasetKey& dataset,
                                             const std::string& path, int64_t index,
                                             const std::string& etag, bool fill, int64_t length,
                                             std::stop_token stop, std::string buffer) {
  if (passedOver(node)) {
    return unavailable("cache node " + node + " stalled or left mid-chunk; passed over for " +
                       std::to_string(kPassOver.count()) + " s");
  }
  if (const auto plane = client_ ? planeOf(node) : std::nullopt) {
    const ChunkRequest request{.ns = dataset.ns,
                               .name = dataset.name,
                               .uid = dataset.uid,
                               .generation = dataset.generation,
                               .path = path,
                               .index = index,
                               .etag = etag,
                               .fill = fill,
                               .length = length};
    auto data = client_->readChunk(*plane, request, stop, std::move(buffer));
    if (data.isOk() || !unreachable(data.status())) {
      if (data.status().code() == StatusCode::kUnavailable) passOver(node);  // stalled or left
      return data;
    }
    planeFailed(node);
  }
  return grpc_.readChunk(node, dataset, path, index, etag, fill, length, stop, std::move(buffer));
}

Status TransferPeers::putCheckpointFile(const std::string& node,
                                        const v1::CheckpointFilePiece& header, int fd, int64_t size,
                                        const checkpoint::OriginWriter::Pace& pace) {
  if (const auto plane = client_ ? planeOf(node) : std::nullopt) {
    const Status put = client_->putFile(*plane, header.SerializeAsString(), fd, size, pace);
    if (!unreachable(put)) return put;
    planeFailed(node);
  }
  return grpc_.putCheckpointFile(node, header, fd, size, pace);
}

Status TransferPeers::readCheckpointFile(const std::string& node,
                                         const v1::ReadCheckpointFileRequest& request, int fd,
                                         const std::function<void(int64_t)>& arrived) {
  if (const auto plane = client_ ? planeOf(node) : std::nullopt) {
    const Status read =
        client_->readFile(*plane, request.SerializeAsString(), request.file().size(), fd, arrived);
    if (!unreachable(read)) return read;
    planeFailed(node);
  }
  return grpc_.readCheckpointFile(node, request, fd, arrived);
}

std::optional<Endpoint> TransferPeers::planeOf(const std::string& node) {
  const auto address = grpc_.addressOf(node);
  if (!address) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  std::optional<int> port;  // known for this address
  {
    MutexLock lock(mutex_);
    const auto known = planes_.find(node);
    if (known != planes_.end() && known->second.grpcAddress == *address &&
        (known->second.port != 0 || now < known->second.askAgainAt)) {
      port = known->second.port;
    }
  }
  if (!port) {
    const auto asked = grpc_.describeTransfer(node);
    if (!asked.isOk()) return std::nullopt;  // gRPC says why, on the read that follows
    port = *asked;
    MutexLock lock(mutex_);
    planes_[node] = Plane{.grpcAddress = *address, .port = *port, .askAgainAt = now + kPlaneRetry};
  }
  const auto hostPort = splitHostPort(*address, "address");
  if (*port == 0 || !hostPort.isOk()) return std::nullopt;
  return Endpoint{.node = node, .host = hostPort->first, .port = *port};
}

bool TransferPeers::passedOver(const std::string& node) {
  MutexLock lock(mutex_);
  const auto found = passedOver_.find(node);
  if (found == passedOver_.end()) return false;
  if (std::chrono::steady_clock::now() < found->second) return true;
  passedOver_.erase(found);
  return false;
}

void TransferPeers::passOver(const std::string& node) {
  MutexLock lock(mutex_);
  passedOver_[node] = std::chrono::steady_clock::now() + kPassOver;
}

void TransferPeers::planeFailed(const std::string& node) {
  MutexLock lock(mutex_);
  Plane& plane = planes_[node];
  plane.port = 0;
  plane.askAgainAt = std::chrono::steady_clock::now() + kPlaneRetry;
}

}  // namespace granary::cache::transfer
