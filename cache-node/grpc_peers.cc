#include "cache-node/grpc_peers.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>
#include <xxhash.h>

#include <optional>

#include "cache-node/api_convert.h"
#include "common/files.h"
#include "common/grpc_status.h"
#include "granary/v1/peer.grpc.pb.h"

namespace granary::cache {

struct GrpcPeers::Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Peer::Stub> stub;
};

GrpcPeers::GrpcPeers(PeerClientOptions options)
    : options_(std::move(options)),
      caPem_(options_.tlsCaFile.empty() ? "" : readTextFile(options_.tlsCaFile).valueOr("")) {}
GrpcPeers::~GrpcPeers() = default;

void GrpcPeers::setAddress(const std::string& node, const std::string& address) {
  MutexLock lock(mutex_);
  addresses_[node] = address;
}

std::optional<std::string> GrpcPeers::addressOf(const std::string& node) {
  MutexLock lock(mutex_);
  const auto address = addresses_.find(node);
  if (address == addresses_.end()) return std::nullopt;
  return address->second;
}

Result<int> GrpcPeers::describeTransfer(const std::string& node) {
  grpc::ClientContext context;
  GRANARY_ASSIGN_OR_RETURN(const auto connection, callTo(node, context));
  context.set_deadline(grpcDeadlineAfter(std::chrono::seconds(10)));
  v1::DescribeTransferResponse response;
  const grpc::Status status =
      connection->stub->DescribeTransfer(&context, v1::DescribeTransferRequest(), &response);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) return 0;
  if (!status.ok()) {
    Status mapped = fromGrpc(status);
    return Status(mapped.code(), "cache node " + node + ": " + mapped.message());
  }
  return response.port();
}

std::shared_ptr<GrpcPeers::Connection> GrpcPeers::connectionTo(const std::string& node) {
  MutexLock lock(mutex_);
  const auto address = addresses_.find(node);
  if (address == addresses_.end()) return nullptr;
  auto& connection = connections_[address->second];
  if (!connection) {
    const auto credentials = options_.tlsCaFile.empty()
                                 ? grpc::InsecureChannelCredentials()
                                 : grpc::SslCredentials({.pem_root_certs = caPem_});
    grpc::ChannelArguments args = nodeChannelArguments();
    args.SetMaxReceiveMessageSize(64 << 20);
    // A peer that stops answering (a partition, not a closed connection) fails the calls in
    // flight within 40 s, a followed listing among them, which has no deadline.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
    connection = std::make_shared<Connection>();
    connection->channel = grpc::CreateCustomChannel(address->second, credentials, args);
    connection->stub = v1::Peer::NewStub(connection->channel);
  }
  return connection;
}

Result<std::shared_ptr<GrpcPeers::Connection>> GrpcPeers::callTo(const std::string& node,
                                                                 grpc::ClientContext& context) {
  auto connection = connectionTo(node);
  if (!connection) return unavailable("no address known for cache node " + node);
  context.AddMetadata("authorization", "Bearer " + options_.token.reveal());
  return connection;
}

Result<std::string> GrpcPeers::readChunk(const std::string& node, const DatasetKey& dataset,
                                         const std::string& path, int64_t index,
                                         const std::string& etag, bool fill, int64_t length,
                                         std::stop_token stop, std::string buffer) {
  grpc::ClientContext context;
  GRANARY_ASSIGN_OR_RETURN(const auto connection, callTo(node, context));
  context.set_deadline(grpcDeadlineAfter(options_.timeout));
  const std::stop_callback cancel(stop, [&] { context.TryCancel(); });
  v1::ReadChunkRequest request;
  *request.mutable_chunk()->mutable_dataset() = refOf(dataset);
  request.mutable_chunk()->set_path(path);
  request.mutable_chunk()->set_index(index);
  request.set_etag(etag);
  request.set_fill(fill);
  auto reader = connection->stub->ReadChunk(&context, request);
  std::string data = std::move(buffer);
  data.clear();
  data.reserve(static_cast<size_t>(length));
  v1::ChunkData message;
  bool last = false;
  uint64_t checksum = 0;
  while (reader->Read(&message)) {
    if (message.offset() != static_cast<int64_t>(data.size()) ||
        message.offset() + static_cast<int64_t>(message.data().size()) > length) {
      context.TryCancel();
      break;
    }
    data += message.data();
    if (message.last()) last = true, checksum = message.xxh3();
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    Status mapped = fromGrpc(status);
    return Status(mapped.code(), "cache node " + node + ": " + mapped.message());
  }
  if (!last) return unavailable("cache node " + node + " ended the chunk early");
  if (XXH3_64bits(data.data(), data.size()) != checksum)
    return corruption("chunk from cache node " + node + " failed its checksum");
  return data;
}

Result<ManifestTotals> GrpcPeers::followListing(
    const std::string& node, const DatasetKey& dataset, std::span<const KeyRange> share,
    std::stop_token stop, const std::function<Status(std::span<const ManifestEntry>)>& each) {
  grpc::ClientContext context;
  GRANARY_ASSIGN_OR_RETURN(const auto connection, callTo(node, context));
  const std::stop_callback cancel(stop, [&] { context.TryCancel(); });
  v1::FollowListingRequest request;
  *request.mutable_dataset() = refOf(dataset);
  for (const KeyRange& range : share) {
    v1::ListingRange& wanted = *request.add_share();
    wanted.set_after(range.after);
    wanted.set_through(range.through);
  }
  auto reader = connection->stub->FollowListing(&context, request);
  v1::ListingPage page;
  std::optional<ManifestTotals> totals;
  bool ofShare = false;
  Status handed = Status::ok();
  while (handed.isOk() && reader->Read(&page)) {
    if (page.complete()) {
      totals = ManifestTotals{.files = page.total_files(), .bytes = page.total_bytes()};
      ofShare = page.of_share();
      continue;
    }
    std::vector<ManifestEntry> files;
    files.reserve(static_cast<size_t>(page.files_size()));
    for (const auto& file : page.files()) files.push_back(manifestEntryOf(file));
    handed = each(files);
  }
  if (!handed.isOk()) context.TryCancel();
  const grpc::Status status = reader->Finish();
  GRANARY_RETURN_IF_ERROR(handed);
  if (stop.stop_requested()) return cancelled("stopping");
  if (!status.ok()) {
    Status mapped = fromGrpc(status);
    return Status(mapped.code(), "cache node " + node + ": " + mapped.message());
  }
  if (!totals) return unavailable("cache node " + node + " ended its listing early");
  if (!share.empty() && !ofShare)
    return conflict("cache node " + node +
                    " sent its whole listing for a share of it (a version "
                    "that does not list in shares)");
  return *totals;
}

namespace {

// "cache node NODE: MESSAGE" with the call's code.
Status fromPeer(const std::string& node, const grpc::Status& status) {
  if (status.ok()) return Status::ok();
  const Status mapped = fromGrpc(status);
  return Status(mapped.code(), "cache node " + node + ": " + mapped.message());
}

constexpr int64_t kPieceBytes = 1 << 20;

}  // namespace

Status GrpcPeers::putCheckpointFile(const std::string& node, const v1::CheckpointFilePiece& header,
                                    int fd, int64_t size,
                                    const checkpoint::OriginWriter::Pace& pace) {
  grpc::ClientContext context;
  GRANARY_ASSIGN_OR_RETURN(const auto connection, callTo(node, context));
  v1::PutCheckpointFileResponse response;
  auto writer = connection->stub->PutCheckpointFile(&context, &response);
  v1::CheckpointFilePiece piece = header;
  XXH3_state_t* hash = XXH3_createState();
  XXH3_64bits_reset(hash);
  std::string buffer;
  Status sent = Status::ok();
  for (int64_t offset = 0;; offset += static_cast<int64_t>(buffer.size())) {
    const int64_t wanted = std::min(kPieceBytes, size - offset);
    if (!pace(wanted)) {
      sent = cancelled("the copy of " + header.version().path() + " stopped");
      break;
    }
    buffer.resize(static_cast<size_t>(wanted));
    if (wanted > 0 && ::pread(fd, buffer.data(), buffer.size(), offset) != wanted) {
      sent = unavailable("cannot read " + header.version().path());
      break;
    }
    XXH3_64bits_update(hash, buffer.data(), buffer.size());
    piece.set_data(buffer);
    const bool last = offset + wanted >= size;
    if (last && wanted > 0 && !pace(0)) {  // the file changed while it was read
      sent = cancelled("the copy of " + header.version().path() + " stopped");
      break;
    }
    if (last) {
      piece.set_last(true);
      piece.set_xxh3(XXH3_64bits_digest(hash));
    }
    if (!writer->Write(piece) || last) break;
    piece.Clear();
  }
  XXH3_freeState(hash);
  if (!sent.isOk()) context.TryCancel();
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  GRANARY_RETURN_IF_ERROR(sent);
  return fromPeer(node, status);
}

Result<v1::CheckpointFileList> GrpcPeers::listCheckpointFiles(
    const std::string& node, const v1::CheckpointVolumeRef& volume) {
  grpc::ClientContext context;
  GRANARY_ASSIGN_OR_RETURN(const auto connection, callTo(node, context));
  context.set_deadline(grpcDeadlineAfter(options_.timeout));
  v1::CheckpointFileList list;
  GRANARY_RETURN_IF_ERROR(
      fromPeer(node, connection->stub->ListCheckpointFiles(&context, volume, &list)));
  return list;
}

Status GrpcPeers::readCheckpointFile(const std::string& node,
                                     const v1::ReadCheckpointFileRequest& request, int fd,
                                     const std::function<void(int64_t)>& arrived) {
  grpc::ClientContext context;
  GRANARY_ASSIGN_OR_RETURN(const auto connection, callTo(node, context));
  auto reader = connection->stub->ReadCheckpointFile(&context, request);
  XXH3_state_t* hash = XXH3_createState();
  XXH3_64bits_reset(hash);
  v1::CheckpointFilePiece piece;
  int64_t at = 0;
  bool last = false, checked = false;
  Status written = Status::ok();
  while (written.isOk() && !last && reader->Read(&piece)) {
    const std::string& data = piece.data();
    if (!data.empty() &&
        ::pwrite(fd, data.data(), data.size(), at) != static_cast<ssize_t>(data.size()))
      written = unavailable("cannot write " + request.file().path() + " from cache node " + node);
    XXH3_64bits_update(hash, data.data(), data.size());
    at += static_cast<int64_t>(data.size());
    arrived(static_cast<int64_t>(data.size()));
    last = piece.last();
    checked = last && XXH3_64bits_digest(hash) == piece.xxh3();
  }
  XXH3_freeState(hash);
  if (!written.isOk()) context.TryCancel();
  const grpc::Status status = reader->Finish();
  GRANARY_RETURN_IF_ERROR(written);
  GRANARY_RETURN_IF_ERROR(fromPeer(node, status));
  if (!last)
    return unavailable("cache node " + node + " ended " + request.file().path() + " early");
  if (!checked || at != request.file().size())
    return corruption(request.file().path() + " from cache node " + node + " failed its checksum");
  return Status::ok();
}

Status GrpcPeers::updateCheckpointCopies(const std::string& node,
                                         const v1::UpdateCheckpointCopiesRequest& request) {
  grpc::ClientContext context;
  GRANARY_ASSIGN_OR_RETURN(const auto connection, callTo(node, context));
  context.set_deadline(grpcDeadlineAfter(options_.timeout));
  v1::UpdateCheckpointCopiesResponse response;
  return fromPeer(node, connection->stub->UpdateCheckpointCopies(&context, request, &response));
}

}  // namespace granary::cache
