#include "cache-node/grpc_service.h"

#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <xxhash.h>

#include <set>
#include <thread>

#include "cache-node/api_convert.h"
#include "cache-node/refreshes.h"
#include "cache-node/transfer/frame.h"
#include "common/files.h"
#include "common/grpc_status.h"
#include "granary/v1/cache_node.grpc.pb.h"
#include "granary/v1/peer.grpc.pb.h"

namespace granary::cache {
namespace {

constexpr int64_t kMessageBytes = 1 << 20;  // data per streamed message

grpc::Status authorize(const grpc::ServerContext& context, const Secret& token) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end())
    return {grpc::StatusCode::UNAUTHENTICATED, "missing \"authorization: Bearer <token>\""};
  const std::string_view presented(it->second.data(), it->second.size());
  if (!presented.starts_with("Bearer ") || !token.matches(presented.substr(7)))
    return {grpc::StatusCode::UNAUTHENTICATED, "wrong bearer token"};
  return grpc::Status::OK;
}

#define GRANARY_AUTHORIZE(context)                                         \
  if (grpc::Status denied = authorize(*(context), token_); !denied.ok()) { \
    return denied;                                                         \
  }

class CacheNodeService final : public v1::CacheNode::Service {
 public:
  CacheNodeService(CacheEngine& engine, GrpcPeers& peers, const Secret& token,
                   ReaderAccounting* readers, GpuSampler* gpus, EnsuredRecord* ensured,
                   const CutOffReaders* cutOff, const GenerationReaders* generationReaders,
                   CheckpointVolumes* checkpoints, CheckpointPeers* checkpointPeers)
      : engine_(engine),
        peers_(peers),
        token_(token),
        readers_(readers),
        gpus_(gpus),
        ensured_(ensured),
        cutOff_(cutOff),
        generationReaders_(generationReaders),
        checkpoints_(checkpoints),
        checkpointPeers_(checkpointPeers),
        refreshes_(engine) {}

  grpc::Status EnsureDataset(grpc::ServerContext* context, const v1::EnsureDatasetRequest* request,
                             v1::EnsureDatasetResponse* response) override {
    GRANARY_AUTHORIZE(context);
    auto cache = ensureRequested(engine_, peers_, *request);
    if (!cache.isOk()) return toGrpc(cache.status());
    if (ensured_) ensured_->ensured(*request);
    return statusOfDataset(request->dataset(), *response->mutable_status());
  }

  grpc::Status PurgeDataset(grpc::ServerContext* context, const v1::PurgeDatasetRequest* request,
                            v1::PurgeDatasetResponse* response) override {
    GRANARY_AUTHORIZE(context);
    auto freed = engine_.purge(keyOf(request->dataset()), request->all_generations());
    if (!freed.isOk()) return toGrpc(freed.status());
    if (ensured_) ensured_->purged(request->dataset(), request->all_generations());
    response->set_freed_bytes(*freed);
    return grpc::Status::OK;
  }

  grpc::Status RefreshDataset(grpc::ServerContext* context,
                              const v1::RefreshDatasetRequest* request,
                              v1::RefreshDatasetResponse* response) override {
    GRANARY_AUTHORIZE(context);
    if (request->dataset().generation() <= 0 ||
        request->next_generation() <= request->dataset().generation()) {
      return toGrpc(invalidArgument("next_generation: a refresh of generation " +
                                    std::to_string(request->dataset().generation()) +
                                    " makes a version above it"));
    }
    auto answer = refreshes_.request(keyOf(request->dataset()), request->next_generation());
    if (!answer.isOk()) return toGrpc(answer.status());
    *response = std::move(*answer);
    return grpc::Status::OK;
  }

  grpc::Status GetDatasetStatus(grpc::ServerContext* context,
                                const v1::GetDatasetStatusRequest* request,
                                v1::DatasetStatus* response) override {
    GRANARY_AUTHORIZE(context);
    return statusOfDataset(request->dataset(), *response);
  }

  grpc::Status ListDatasets(grpc::ServerContext* context, const v1::ListDatasetsRequest*,
                            v1::ListDatasetsResponse* response) override {
    GRANARY_AUTHORIZE(context);
    for (const auto& cache : engine_.datasets())
      *response->add_datasets() = statusWithReaders(*cache);
    return grpc::Status::OK;
  }

  grpc::Status WatchProgress(grpc::ServerContext* context, const v1::WatchProgressRequest* request,
                             grpc::ServerWriter<v1::DatasetStatus>* writer) override {
    GRANARY_AUTHORIZE(context);
    using google::protobuf::util::TimeUtil;
    auto interval = std::chrono::milliseconds(
        request->has_interval() ? TimeUtil::DurationToMilliseconds(request->interval()) : 1000);
    interval = std::max(interval, std::chrono::milliseconds(100));
    while (!context->IsCancelled()) {
      v1::DatasetStatus status;
      const grpc::Status found = statusOfDataset(request->dataset(), status);
      if (!found.ok()) return found;  // purged: the stream ends
      if (!writer->Write(status)) break;
      for (auto waited = std::chrono::milliseconds(0); waited < interval && !context->IsCancelled();
           waited += std::chrono::milliseconds(50)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status SetWarmPlan(grpc::ServerContext* context, const v1::SetWarmPlanRequest* request,
                           v1::SetWarmPlanResponse*) override {
    GRANARY_AUTHORIZE(context);
    if (const std::string& file = request->access_order_file(); !file.empty()) {
      if (const Status valid = validateManifestPath(file); !valid.isOk())
        return toGrpc(invalidArgument("access_order_file: " + valid.message() +
                                      "; name a file of the dataset, relative to its root"));
    }
    auto cache = engine_.find(keyOf(request->dataset()));
    if (!cache.isOk()) return toGrpc(cache.status());
    (*cache)->setWarmPlan(warmPlanOf(*request));
    return grpc::Status::OK;
  }

  grpc::Status Stat(grpc::ServerContext* context, const v1::StatRequest* request,
                    v1::FileInfo* response) override {
    GRANARY_AUTHORIZE(context);
    auto served = engine_.resolve(keyOf(request->dataset()));
    if (!served.isOk()) return toGrpc(served.status());
    auto entry = served->cache->stat(served->pathOf(request->path()));
    if (!entry.isOk()) return toGrpc(entry.status());
    *response = fileInfoOf(*entry);
    response->set_path(served->relativePath(response->path()));
    return grpc::Status::OK;
  }

  grpc::Status ListDirectory(grpc::ServerContext* context, const v1::ListDirectoryRequest* request,
                             v1::ListDirectoryResponse* response) override {
    GRANARY_AUTHORIZE(context);
    auto served = engine_.resolve(keyOf(request->dataset()));
    if (!served.isOk()) return toGrpc(served.status());
    const int pageSize = request->page_size() <= 0 ? 1000 : std::min(request->page_size(), 10000);
    auto entries = served->cache->list(served->pathOf(request->path()), request->page_token(),
                                       static_cast<size_t>(pageSize));
    if (!entries.isOk()) return toGrpc(entries.status());
    for (const auto& entry : *entries) {
      v1::FileInfo& info = *response->add_entries() = fileInfoOf(entry);
      info.set_path(served->relativePath(info.path()));
    }
    if (static_cast<int>(entries->size()) == pageSize) {
      const std::string& last = entries->back().path;
      response->set_next_page_token(last.substr(last.rfind('/') + 1));
    }
    return grpc::Status::OK;
  }

  grpc::Status Read(grpc::ServerContext* context, const v1::ReadRequest* request,
                    grpc::ServerWriter<v1::ReadResponse>* writer) override {
    GRANARY_AUTHORIZE(context);
    if (request->offset() < 0) return {grpc::StatusCode::INVALID_ARGUMENT, "offset: must be >= 0"};
    if (request->length() < -1)
      return {grpc::StatusCode::INVALID_ARGUMENT, "length: must be >= 0, or -1 for the rest"};
    auto served = engine_.resolve(keyOf(request->dataset()));
    if (!served.isOk()) return toGrpc(served.status());
    const std::string path = served->pathOf(request->path());
    int64_t offset = request->offset();
    int64_t left = request->length() < 0 ? INT64_MAX : request->length();
    while (left > 0 && !context->IsCancelled()) {
      auto piece = served->cache->readPiece(path, offset, std::min(left, kMessageBytes));
      if (!piece.isOk()) return toGrpc(piece.status());
      if (piece->data.empty()) break;
      v1::ReadResponse response;
      response.set_offset(offset);
      response.set_source(readSourceOf(piece->source));
      offset += static_cast<int64_t>(piece->data.size());
      left -= static_cast<int64_t>(piece->data.size());
      response.set_data(std::move(piece->data));
      if (!writer->Write(response)) break;
    }
    return grpc::Status::OK;
  }

  grpc::Status GetTelemetry(grpc::ServerContext* context, const v1::GetTelemetryRequest* request,
                            v1::GetTelemetryResponse* response) override {
    GRANARY_AUTHORIZE(context);
    *response->mutable_sample_time() = google::protobuf::util::TimeUtil::GetCurrentTime();
    response->set_node_name(engine_.nodeName());
    // A view's readers read its source: they are counted there.
    std::set<std::string> labels;
    for (const auto& ref : request->datasets()) {
      auto served = engine_.resolve(keyOf(ref));
      labels.insert(served.isOk() ? served->cache->key().label() : keyOf(ref).label());
    }
    const auto wanted = [&](const std::string& ns, const std::string& name) {
      return request->datasets().empty() || labels.contains(ns + "/" + name);
    };
    for (const auto& cache : engine_.datasets()) {
      if (wanted(cache->key().ns, cache->key().name))
        *response->add_datasets() = statusOf(cache->key(), cache->state(), engine_.nodeName());
    }
    for (const auto& reader : readers_ ? readers_->readers() : std::vector<ReaderTotals>{}) {
      auto telemetry = readerTelemetryOf(reader);
      if (wanted(telemetry.dataset().namespace_(), telemetry.dataset().name()))
        *response->add_readers() = std::move(telemetry);
    }
    if (gpus_ == nullptr) {
      response->set_gpu_unavailable_reason(
          "GPU telemetry is off on this cache node (its option gpuTelemetry is false)");
    } else if (const std::string reason = gpus_->unavailableReason(); !reason.empty()) {
      response->set_gpu_unavailable_reason(reason);
    } else {
      const auto totals = gpus_->totals();
      for (const auto& reading : gpus_->latest()) {
        const auto t = totals.find(reading.uuid);
        *response->add_gpus() =
            gpuTelemetryOf(reading, t == totals.end() ? GpuTotals{} : t->second);
      }
      *response->mutable_gpu_sample_time() =
          google::protobuf::util::TimeUtil::NanosecondsToTimestamp(
              std::chrono::duration_cast<std::chrono::nanoseconds>(
                  gpus_->sampledAt().time_since_epoch())
                  .count());
      for (const auto& [pod, seconds] : gpus_->starvedSeconds()) {
        v1::PodTelemetry* out = response->add_pods();
        const size_t slash = pod.find('/');
        out->set_namespace_(pod.substr(0, slash));
        out->set_name(pod.substr(slash + 1));
        out->set_data_starved_seconds(seconds);
      }
    }
    if (checkpoints_) {
      for (const CheckpointVolumeState& volume : checkpoints_->states())
        *response->add_checkpoint_volumes() = checkpointTelemetryOf(volume);
    }
    return grpc::Status::OK;
  }

  grpc::Status SetCheckpointPeers(grpc::ServerContext* context,
                                  const v1::SetCheckpointPeersRequest* request,
                                  v1::SetCheckpointPeersResponse*) override {
    GRANARY_AUTHORIZE(context);
    if (!checkpoints_ || !checkpointPeers_)
      return toGrpc(failedPrecondition("this node keeps no checkpoint volumes"));
    return toGrpc(checkpointPeers_->setPeers(*checkpoints_, *request));
  }

 private:
  // The status of the dataset `ref` names, or of a view's source.
  grpc::Status statusOfDataset(const v1::DatasetRef& ref, v1::DatasetStatus& out) const {
    auto served = engine_.resolve(keyOf(ref));
    if (!served.isOk()) return toGrpc(served.status());
    out = statusWithReaders(*served->cache);
    if (cutOff_) {
      for (const auto& reader : cutOff_->of(ref.namespace_() + "/" + ref.name())) {
        v1::CutOffReader* out_reader = out.add_cut_off_readers();
        out_reader->set_pod_namespace(reader.podNamespace);
        out_reader->set_pod_name(reader.podName);
        out_reader->set_pod_uid(reader.podUid);
        *out_reader->mutable_since() = google::protobuf::util::TimeUtil::NanosecondsToTimestamp(
            std::chrono::duration_cast<std::chrono::nanoseconds>(reader.since.time_since_epoch())
                .count());
      }
    }
    return grpc::Status::OK;
  }

  // A generation's status, with the pods whose volumes read it.
  v1::DatasetStatus statusWithReaders(DatasetCache& cache) const {
    const DatasetKey& key = cache.key();
    v1::DatasetStatus status = statusOf(key, cache.state(), engine_.nodeName());
    if (generationReaders_)
      status.set_readers(generationReaders_->of({key.ns, key.name, key.generation}));
    return status;
  }

  CacheEngine& engine_;
  GrpcPeers& peers_;
  const Secret& token_;
  ReaderAccounting* readers_;
  GpuSampler* gpus_;
  EnsuredRecord* ensured_;                      // may be null
  const CutOffReaders* cutOff_;                 // may be null
  const GenerationReaders* generationReaders_;  // may be null
  CheckpointVolumes* checkpoints_;              // may be null
  CheckpointPeers* checkpointPeers_;            // may be null
  Refreshes refreshes_;
};

class PeerService final : public v1::Peer::Service {
 public:
  PeerService(CacheEngine& engine, const Secret& token, CheckpointVolumes* checkpoints,
              int transferPort)
      : engine_(engine), token_(token), checkpoints_(checkpoints), transferPort_(transferPort) {}

  grpc::Status DescribeTransfer(grpc::ServerContext* context, const v1::DescribeTransferRequest*,
                                v1::DescribeTransferResponse* response) override {
    GRANARY_AUTHORIZE(context);
    response->set_port(transferPort_);
    response->set_version(transfer::kVersion);
    return grpc::Status::OK;
  }

  grpc::Status PutCheckpointFile(grpc::ServerContext* context,
                                 grpc::ServerReader<v1::CheckpointFilePiece>* reader,
                                 v1::PutCheckpointFileResponse*) override {
    GRANARY_AUTHORIZE(context);
    if (!checkpoints_) return toGrpc(failedPrecondition("this node keeps no checkpoint volumes"));
    return receiveCheckpointFile(*checkpoints_, *reader);
  }

  grpc::Status ListCheckpointFiles(grpc::ServerContext* context,
                                   const v1::CheckpointVolumeRef* volume,
                                   v1::CheckpointFileList* response) override {
    GRANARY_AUTHORIZE(context);
    if (!checkpoints_) return toGrpc(failedPrecondition("this node keeps no checkpoint volumes"));
    return toGrpc(listCheckpointFiles(*checkpoints_, *volume, *response));
  }

  grpc::Status ReadCheckpointFile(grpc::ServerContext* context,
                                  const v1::ReadCheckpointFileRequest* request,
                                  grpc::ServerWriter<v1::CheckpointFilePiece>* writer) override {
    GRANARY_AUTHORIZE(context);
    if (!checkpoints_) return toGrpc(failedPrecondition("this node keeps no checkpoint volumes"));
    return sendCheckpointFile(*checkpoints_, *request, *writer);
  }

  grpc::Status UpdateCheckpointCopies(grpc::ServerContext* context,
                                      const v1::UpdateCheckpointCopiesRequest* request,
                                      v1::UpdateCheckpointCopiesResponse*) override {
    GRANARY_AUTHORIZE(context);
    if (!checkpoints_) return toGrpc(failedPrecondition("this node keeps no checkpoint volumes"));
    return toGrpc(takeCheckpointNews(*checkpoints_, *request));
  }

  grpc::Status ReadChunk(grpc::ServerContext* context, const v1::ReadChunkRequest* request,
                         grpc::ServerWriter<v1::ChunkData>* writer) override {
    GRANARY_AUTHORIZE(context);
    const auto& chunk = request->chunk();
    auto cache = engine_.find(keyOf(chunk.dataset()));
    if (!cache.isOk()) return toGrpc(cache.status());
    auto read =
        (*cache)->readChunkForPeer(chunk.path(), chunk.index(), request->etag(), request->fill());
    if (!read.isOk()) return toGrpc(read.status());
    const std::string& data = **read;
    const uint64_t checksum = XXH3_64bits(data.data(), data.size());
    int64_t offset = 0;
    const auto size = static_cast<int64_t>(data.size());
    do {
      v1::ChunkData message;
      const int64_t n = std::min(kMessageBytes, size - offset);
      message.set_offset(offset);
      message.set_data(data.data() + offset, static_cast<size_t>(n));
      offset += n;
      if (offset == size) {
        message.set_last(true);
        message.set_xxh3(checksum);
      }
      if (!writer->Write(message)) break;
    } while (offset < size);
    return grpc::Status::OK;
  }

  grpc::Status FollowListing(grpc::ServerContext* context, const v1::FollowListingRequest* request,
                             grpc::ServerWriter<v1::ListingPage>* writer) override {
    GRANARY_AUTHORIZE(context);
    auto cache = engine_.find(keyOf(request->dataset()));
    if (!cache.isOk()) return toGrpc(cache.status());
    std::vector<KeyRange> share;
    for (const auto& range : request->share()) share.push_back({range.after(), range.through()});
    auto totals = (*cache)->shareListing(share, [&](std::span<const ManifestEntry> files) {
      v1::ListingPage page;
      for (const auto& file : files) *page.add_files() = fileInfoOf(file);
      if (context->IsCancelled() || !writer->Write(page)) return cancelled("the follower left");
      return Status::ok();
    });
    if (!totals.isOk()) return toGrpc(totals.status());
    v1::ListingPage last;
    last.set_complete(true);
    last.set_total_files(totals->files);
    last.set_total_bytes(totals->bytes);
    last.set_of_share(!share.empty());
    writer->Write(last);
    return grpc::Status::OK;
  }

  grpc::Status HasChunks(grpc::ServerContext* context, const v1::HasChunksRequest* request,
                         v1::HasChunksResponse* response) override {
    GRANARY_AUTHORIZE(context);
    for (const auto& chunk : request->chunks()) {
      auto cache = engine_.find(keyOf(chunk.dataset()));
      response->add_present(cache.isOk() && (*cache)->hasChunk(chunk.path(), chunk.index()));
    }
    return grpc::Status::OK;
  }

 private:
  CacheEngine& engine_;
  const Secret& token_;
  CheckpointVolumes* checkpoints_;  // may be null
  const int transferPort_;
};

}  // namespace

Result<std::shared_ptr<DatasetCache>> ensureRequested(CacheEngine& engine, GrpcPeers& peers,
                                                      const v1::EnsureDatasetRequest& request) {
  if (request.has_view()) {
    GRANARY_RETURN_IF_ERROR(engine.ensureView(viewSpecOf(request)));
    return std::shared_ptr<DatasetCache>();
  }
  GRANARY_ASSIGN_OR_RETURN(EnsureSpec spec, ensureSpecOf(request));
  for (const auto& node : request.node_set()) {
    if (!node.address().empty()) peers.setAddress(node.node_name(), node.address());
  }
  return engine.ensure(std::move(spec));
}

struct CacheNodeServer::Services {
  Secret token;
  CacheNodeService cacheNode;
  PeerService peer;
  Services(CacheEngine& engine, GrpcPeers& peers, Secret t, const ServerOptions& options)
      : token(std::move(t)),
        cacheNode(engine, peers, token, options.readers, options.gpus, options.ensured,
                  options.cutOff, options.generationReaders, options.checkpoints,
                  options.checkpointPeers),
        peer(engine, token, options.checkpoints, options.transferPort) {}
};

Result<std::unique_ptr<CacheNodeServer>> CacheNodeServer::start(CacheEngine& engine,
                                                                GrpcPeers& peers,
                                                                ServerOptions options) {
  if (options.token.empty())
    return invalidArgument("token: the API needs a bearer token (tokenFile)");
  if (options.tlsCertificateFile.empty() != options.tlsKeyFile.empty())
    return invalidArgument("tls: give both the certificate and the key file, or neither");
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tlsCertificateFile.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({readTextFile(options.tlsKeyFile).valueOr(""),
                                      readTextFile(options.tlsCertificateFile).valueOr("")});
    if (ssl.pem_key_cert_pairs[0].private_key.empty() ||
        ssl.pem_key_cert_pairs[0].cert_chain.empty()) {
      return invalidArgument("tls: cannot read " + options.tlsCertificateFile + " or " +
                             options.tlsKeyFile);
    }
    credentials = grpc::SslServerCredentials(ssl);
  }
  std::unique_ptr<CacheNodeServer> server(new CacheNodeServer());
  server->services_ = std::make_unique<Services>(engine, peers, options.token, options);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.address, credentials, &server->port_);
  builder.RegisterService(&server->services_->cacheNode);
  builder.RegisterService(&server->services_->peer);
  builder.SetMaxSendMessageSize(64 << 20);
  // Peers ping a connection with calls in flight every 30 s (GrpcPeers), also while a call
  // waits long for its answer (a chunk filled from a slow origin): never too often.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0)
    return unavailable("cannot serve gRPC on " + options.address);
  return server;
}

CacheNodeServer::~CacheNodeServer() {
  if (server_) server_->Shutdown(grpcDeadlineAfter(std::chrono::seconds(1)));
}

}  // namespace granary::cache
