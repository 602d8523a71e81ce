#include "cache-node/checkpoint_peers.h"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>

#include "common/errno_status.h"
#include "common/grpc_status.h"
#include "common/log.h"

namespace granary::cache {
namespace {

v1::CheckpointFileVersion versionOf(const std::string& path, const checkpoint::FileIdentity& id) {
  v1::CheckpointFileVersion version;
  version.set_path(path);
  version.set_size(id.size);
  version.set_modified_nanos(id.modifiedNanos);
  version.set_device(id.device);
  version.set_inode(id.inode);
  return version;
}

checkpoint::FileIdentity identityOf(const v1::CheckpointFileVersion& version) {
  return {.device = version.device(),
          .inode = version.inode(),
          .size = version.size(),
          .modifiedNanos = version.modified_nanos()};
}

}  // namespace

void VolumePeers::setPeers(std::vector<PeerNode> peers) {
  std::vector<std::string> leaving;
  {
    MutexLock lock(mutex_);
    if (peers == peers_) return;
    for (const PeerNode& old : peers_)
      if (std::find_if(peers.begin(), peers.end(),
                       [&](const PeerNode& p) { return p.name == old.name; }) == peers.end())
        leaving.push_back(old.name);
    for (const PeerNode& peer : peers) grpc_.setAddress(peer.name, peer.address);
    peers_ = std::move(peers);
    ++generation_;
  }
  v1::UpdateCheckpointCopiesRequest drop;
  drop.set_drop_held(true);
  if (Status told = tell(leaving, drop); !told.isOk())
    Logger("checkpoints")
        .info("a former peer was not told to drop its copies",
              {{"uri", volume_.uri()}, {"error", told}});
}

checkpoint::CopyTargets::Set VolumePeers::current() const {
  MutexLock lock(mutex_);
  return {.generation = generation_, .count = static_cast<int>(peers_.size())};
}

std::vector<std::string> VolumePeers::names() const {
  MutexLock lock(mutex_);
  std::vector<std::string> out;
  for (const PeerNode& peer : peers_) out.push_back(peer.name);
  return out;
}

Status VolumePeers::copy(const std::string& path, int fd, const checkpoint::FileIdentity& version,
                         bool atOrigin, const checkpoint::OriginWriter::Pace& pace) {
  v1::CheckpointFilePiece header;
  *header.mutable_volume() = volume_;
  header.set_writer(self_);
  *header.mutable_version() = versionOf(path, version);
  header.set_at_origin(atOrigin);
  for (const std::string& node : names())
    GRANARY_RETURN_IF_ERROR(files_.putCheckpointFile(node, header, fd, version.size, pace));
  return Status::ok();
}

Status VolumePeers::atOrigin(const std::string& path, const checkpoint::FileIdentity& version) {
  v1::UpdateCheckpointCopiesRequest request;
  *request.add_at_origin() = versionOf(path, version);
  return tell(names(), std::move(request));
}

Status VolumePeers::removed(const std::string& path) {
  v1::UpdateCheckpointCopiesRequest request;
  request.add_removed(path);
  return tell(names(), std::move(request));
}

Status VolumePeers::tell(const std::vector<std::string>& nodes,
                         v1::UpdateCheckpointCopiesRequest request) {
  *request.mutable_volume() = volume_;
  request.set_writer(self_);
  Status first = Status::ok();
  for (const std::string& node : nodes)
    if (Status told = grpc_.updateCheckpointCopies(node, request); first.isOk()) first = told;
  return first;
}

Result<std::vector<checkpoint::PeerFile>> GrpcPeerTree::list() {
  GRANARY_ASSIGN_OR_RETURN(const v1::CheckpointFileList list,
                           grpc_.listCheckpointFiles(node_, volume_));
  std::vector<checkpoint::PeerFile> files;
  for (const auto& f : list.files())
    files.push_back({f.path(), f.size(), f.modified_nanos(), f.at_origin()});
  return files;
}

Status GrpcPeerTree::read(const checkpoint::PeerFile& file, int fd,
                          const std::function<void(int64_t)>& arrived) {
  v1::ReadCheckpointFileRequest request;
  *request.mutable_volume() = volume_;
  v1::CheckpointFileEntry& entry = *request.mutable_file();
  entry.set_path(file.path);
  entry.set_size(file.size);
  entry.set_modified_nanos(file.modifiedNanos);
  return files_.readCheckpointFile(node_, request, fd, arrived);
}

std::vector<std::shared_ptr<checkpoint::PeerTree>> CheckpointPeers::treesOf(
    const std::string& ns, const std::string& uri,
    const std::vector<std::pair<std::string, std::string>>& peers) {
  v1::CheckpointVolumeRef volume;
  volume.set_namespace_(ns);
  volume.set_uri(uri);
  std::vector<std::shared_ptr<checkpoint::PeerTree>> trees;
  for (const auto& [node, address] : peers) {
    if (node == self_) continue;
    grpc_.setAddress(node, address);
    trees.push_back(std::make_shared<GrpcPeerTree>(grpc_, files_, node, volume));
  }
  return trees;
}

std::shared_ptr<checkpoint::CopyTargets> CheckpointPeers::targetsOf(const std::string& ns,
                                                                    const std::string& uri) {
  v1::CheckpointVolumeRef volume;
  volume.set_namespace_(ns);
  volume.set_uri(uri);
  auto peers = std::make_shared<VolumePeers>(grpc_, files_, self_, std::move(volume));
  MutexLock lock(mutex_);
  volumes_[{ns, uri}] = peers;
  return peers;
}

Status CheckpointPeers::setPeers(CheckpointVolumes& volumes,
                                 const v1::SetCheckpointPeersRequest& request) {
  std::shared_ptr<VolumePeers> peers;
  {
    MutexLock lock(mutex_);
    const auto it = volumes_.find({request.namespace_(), request.uri()});
    if (it != volumes_.end()) peers = it->second.lock();
  }
  if (!peers)
    return failedPrecondition("the checkpoint volume of " + request.uri() + " in namespace " +
                              request.namespace_() + " is not open on this node");
  for (const std::string& lost : request.lost_nodes())
    if (lost != self_)
      GRANARY_RETURN_IF_ERROR(volumes.release(request.namespace_(), request.uri(), lost));
  std::vector<PeerNode> set;
  for (const auto& peer : request.peers()) {
    if (peer.node_name() == self_) continue;
    if (peer.node_name().empty() || peer.address().empty())
      return invalidArgument("peers: each needs node_name and address");
    set.push_back({peer.node_name(), peer.address()});
  }
  peers->setPeers(std::move(set));
  return Status::ok();
}

Status placeCheckpointCopy(CheckpointVolumes& volumes, const v1::CheckpointFilePiece& header,
                           const std::function<Status(int fd)>& fill) {
  const checkpoint::PeerCopy copy{.writer = header.writer(),
                                  .path = header.version().path(),
                                  .source = identityOf(header.version()),
                                  .atOrigin = header.at_origin()};
  if (copy.writer.empty()) return invalidArgument("PutCheckpointFile: writer is empty");
  return volumes.placeCopy(header.volume().namespace_(), header.volume().uri(), copy, fill);
}

Status readCheckpointFileFor(const CheckpointVolumes& volumes,
                             const v1::ReadCheckpointFileRequest& request,
                             const std::function<Status(std::string_view)>& each) {
  const v1::CheckpointFileEntry& entry = request.file();
  const checkpoint::PeerFile file{entry.path(), entry.size(), entry.modified_nanos(), false};
  return volumes.readFile(request.volume().namespace_(), request.volume().uri(), file, each);
}

grpc::Status receiveCheckpointFile(CheckpointVolumes& volumes,
                                   grpc::ServerReader<v1::CheckpointFilePiece>& reader) {
  v1::CheckpointFilePiece piece;
  if (!reader.Read(&piece))
    return toGrpc(invalidArgument("PutCheckpointFile: the first piece names the file"));
  v1::CheckpointFilePiece header = piece;
  header.clear_data();
  const std::string path = piece.version().path();
  const auto fill = [&](int fd) -> Status {
    XXH3_state_t* hash = XXH3_createState();
    XXH3_64bits_reset(hash);
    int64_t written = 0;
    bool last = false;
    Status result = Status::ok();
    for (bool more = true; more && result.isOk(); more = !last && reader.Read(&piece)) {
      const std::string& data = piece.data();
      XXH3_64bits_update(hash, data.data(), data.size());
      if (!data.empty() &&
          ::pwrite(fd, data.data(), data.size(), written) != static_cast<ssize_t>(data.size()))
        result = errnoStatus(errno, "cannot write the copy of " + path);
      written += static_cast<int64_t>(data.size());
      last = piece.last();
      if (last && XXH3_64bits_digest(hash) != piece.xxh3())
        result = corruption("the copy of " + path + " failed its checksum");
    }
    XXH3_freeState(hash);
    if (result.isOk() && !last) result = cancelled("the copy of " + path + " ended early");
    return result;
  };
  return toGrpc(placeCheckpointCopy(volumes, header, fill));
}

Status takeCheckpointNews(CheckpointVolumes& volumes,
                          const v1::UpdateCheckpointCopiesRequest& request) {
  checkpoint::CopyNews news{.writer = request.writer(), .dropHeld = request.drop_held()};
  for (const auto& version : request.at_origin())
    news.atOrigin.emplace_back(version.path(), identityOf(version));
  news.removed.assign(request.removed().begin(), request.removed().end());
  return volumes.takeNews(request.volume().namespace_(), request.volume().uri(), news);
}

Status listCheckpointFiles(const CheckpointVolumes& volumes, const v1::CheckpointVolumeRef& volume,
                           v1::CheckpointFileList& out) {
  GRANARY_ASSIGN_OR_RETURN(const auto files, volumes.listing(volume.namespace_(), volume.uri()));
  for (const checkpoint::PeerFile& f : files) {
    v1::CheckpointFileEntry& entry = *out.add_files();
    entry.set_path(f.path);
    entry.set_size(f.size);
    entry.set_modified_nanos(f.modifiedNanos);
    entry.set_at_origin(f.atOrigin);
  }
  return Status::ok();
}

grpc::Status sendCheckpointFile(const CheckpointVolumes& volumes,
                                const v1::ReadCheckpointFileRequest& request,
                                grpc::ServerWriter<v1::CheckpointFilePiece>& writer) {
  XXH3_state_t* hash = XXH3_createState();
  XXH3_64bits_reset(hash);
  v1::CheckpointFilePiece piece;
  const Status read = readCheckpointFileFor(volumes, request, [&](std::string_view bytes) {
    XXH3_64bits_update(hash, bytes.data(), bytes.size());
    piece.set_data(bytes.data(), bytes.size());
    return writer.Write(piece) ? Status::ok() : cancelled("the reader went away");
  });
  piece.Clear();
  piece.set_last(true);
  piece.set_xxh3(XXH3_64bits_digest(hash));
  XXH3_freeState(hash);
  if (!read.isOk()) return toGrpc(read);
  writer.Write(piece);
  return grpc::Status::OK;
}

}  // namespace granary::cache
