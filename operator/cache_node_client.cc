#include "operator/cache_node_client.h"

#include <grpcpp/grpcpp.h>

#include "common/files.h"
#include "common/grpc_status.h"

namespace granary::op {

namespace {

DatasetPhase phaseOf(v1::DatasetPhase phase) {
  switch (phase) {
    case v1::DATASET_PHASE_LISTING:
      return DatasetPhase::kListing;
    case v1::DATASET_PHASE_WARMING:
      return DatasetPhase::kWarming;
    case v1::DATASET_PHASE_READY:
      return DatasetPhase::kReady;
    case v1::DATASET_PHASE_DEGRADED:
      return DatasetPhase::kDegraded;
    case v1::DATASET_PHASE_FAILED:
      return DatasetPhase::kFailed;
    case v1::DATASET_PHASE_ON_DEMAND:
      return DatasetPhase::kOnDemand;
    case v1::DATASET_PHASE_QUOTA_FULL:
      return DatasetPhase::kQuotaFull;
    default:
      return DatasetPhase::kPending;
  }
}

// The node's address prefixed to what it said.
Status fromNode(const std::string& address, const grpc::Status& status) {
  Status mapped = fromGrpc(status);
  return Status(mapped.code(), "cache node " + address + ": " + mapped.message());
}

}  // namespace

NodeProgress progressOf(const v1::DatasetStatus& s) {
  const auto& p = s.progress();
  NodeProgress out;
  out.phase = phaseOf(s.phase());
  out.message = s.message();
  out.totalFiles = p.total_files();
  out.totalBytes = p.total_bytes();
  out.ownedFiles = p.owned_files();
  out.ownedBytes = p.owned_bytes();
  out.cachedFiles = p.cached_files();
  out.cachedBytes = p.cached_bytes();
  out.bytesPerSecond = p.bytes_per_second();
  out.etaSeconds = p.eta_seconds();
  if (p.has_warm_start_time() && p.warm_start_time().seconds() > 0) {
    out.warmStart =
        std::chrono::system_clock::time_point(std::chrono::seconds(p.warm_start_time().seconds()));
  }
  out.originBytes = s.reads().origin_bytes();
  out.chunkHits = s.reads().chunk_hits();
  out.chunkMisses = s.reads().chunk_misses();
  out.capacityBytes = s.capacity_bytes();
  for (const auto& pod : s.cut_off_readers())
    out.cutOff.push_back({.podNamespace = pod.pod_namespace(),
                          .podName = pod.pod_name(),
                          .podUid = pod.pod_uid(),
                          .since = std::chrono::system_clock::time_point(
                              std::chrono::seconds(pod.since().seconds()))});
  out.readers = s.readers();
  out.goneFromOrigin = {s.gone_from_origin().begin(), s.gone_from_origin().end()};
  return out;
}

RefreshAnswer refreshAnswerOf(const v1::RefreshDatasetResponse& response, const std::string& node) {
  using State = RefreshAnswer::State;
  RefreshAnswer answer{.lister = node,
                       .started = response.started(),
                       .listed = response.listed_files(),
                       .added = response.added(),
                       .changed = response.changed(),
                       .removed = response.removed(),
                       .message = response.message()};
  switch (response.state()) {
    case v1::RefreshDatasetResponse::STATE_RUNNING:
      answer.state = State::kRunning;
      break;
    case v1::RefreshDatasetResponse::STATE_CHANGED:
      answer.state = State::kChanged;
      break;
    case v1::RefreshDatasetResponse::STATE_UNCHANGED:
      answer.state = State::kUnchanged;
      break;
    case v1::RefreshDatasetResponse::STATE_FAILED:
      answer.state = State::kFailed;
      break;
    default:
      answer.state = State::kFailed;
      answer.message = "cache node " + node + " answered a refresh it does not know";
  }
  return answer;
}

Result<CounterFamily> declareCacheNodeRequests(MetricsRegistry& registry) {
  return registry.addCounter(
      {.name = "granary_operator_cache_node_requests_total",
       .type = MetricType::kCounter,
       .help = "Calls of the cache-node API by method and result code (ok, unavailable, ...).",
       .labels = {"method", "code"}});
}

CacheNodeClient::CacheNodeClient(CacheNodeClientOptions options) : options_(std::move(options)) {
  if (!options_.tlsCaFile.empty()) caPem_ = readTextFile(options_.tlsCaFile).valueOr("");
}

CacheNodeClient::~CacheNodeClient() = default;

v1::CacheNode::Stub& CacheNodeClient::stubFor(const std::string& address) {
  MutexLock lock(mutex_);
  auto& stub = stubs_[address];
  if (!stub) {
    auto credentials = options_.tlsCaFile.empty()
                           ? grpc::InsecureChannelCredentials()
                           : grpc::SslCredentials({.pem_root_certs = caPem_});
    stub = v1::CacheNode::NewStub(
        grpc::CreateCustomChannel(address, credentials, nodeChannelArguments()));
  }
  return *stub;
}

template <typename Request, typename Response>
Result<Response> CacheNodeClient::call(const std::string& address, const char* method,
                                       Rpc<Request, Response> rpc, const Request& request) {
  grpc::ClientContext context;
  context.set_deadline(grpcDeadlineAfter(options_.timeout));
  context.AddMetadata("authorization", "Bearer " + options_.token.reveal());
  Response response;
  const grpc::Status status = (stubFor(address).*rpc)(&context, request, &response);
  const Status result = status.ok() ? Status::ok() : fromNode(address, status);
  if (options_.requests)
    options_.requests->with({method, std::string(statusCodeName(result.code()))}).increment();
  if (!result.isOk()) return result;
  return response;
}

Result<NodeProgress> CacheNodeClient::ensure(const std::string& address,
                                             const v1::EnsureDatasetRequest& request) {
  GRANARY_ASSIGN_OR_RETURN(
      auto response, call(address, "EnsureDataset", &v1::CacheNode::Stub::EnsureDataset, request));
  return progressOf(response.status());
}

Result<NodeProgress> CacheNodeClient::status(const std::string& address,
                                             const v1::DatasetRef& dataset) {
  v1::GetDatasetStatusRequest request;
  *request.mutable_dataset() = dataset;
  GRANARY_ASSIGN_OR_RETURN(auto response, call(address, "GetDatasetStatus",
                                               &v1::CacheNode::Stub::GetDatasetStatus, request));
  return progressOf(response);
}

Result<int64_t> CacheNodeClient::purge(const std::string& address, const v1::DatasetRef& dataset,
                                       bool allGenerations) {
  v1::PurgeDatasetRequest request;
  *request.mutable_dataset() = dataset;
  request.set_all_generations(allGenerations);
  GRANARY_ASSIGN_OR_RETURN(
      auto response, call(address, "PurgeDataset", &v1::CacheNode::Stub::PurgeDataset, request));
  return response.freed_bytes();
}

Result<std::vector<CacheNodeClient::Held>> CacheNodeClient::list(const std::string& address) {
  GRANARY_ASSIGN_OR_RETURN(
      auto response,
      call(address, "ListDatasets", &v1::CacheNode::Stub::ListDatasets, v1::ListDatasetsRequest()));
  std::vector<Held> out;
  for (const auto& d : response.datasets()) out.push_back({d.dataset(), progressOf(d)});
  return out;
}

Result<v1::RefreshDatasetResponse> CacheNodeClient::refresh(const std::string& address,
                                                            const v1::DatasetRef& dataset,
                                                            int64_t next) {
  v1::RefreshDatasetRequest request;
  *request.mutable_dataset() = dataset;
  request.set_next_generation(next);
  return call(address, "RefreshDataset", &v1::CacheNode::Stub::RefreshDataset, request);
}

Status CacheNodeClient::setWarmPlan(const std::string& address,
                                    const v1::SetWarmPlanRequest& request) {
  return call(address, "SetWarmPlan", &v1::CacheNode::Stub::SetWarmPlan, request).status();
}

Status CacheNodeClient::setCheckpointPeers(const std::string& address,
                                           const v1::SetCheckpointPeersRequest& request) {
  return call(address, "SetCheckpointPeers", &v1::CacheNode::Stub::SetCheckpointPeers, request)
      .status();
}

Result<v1::GetTelemetryResponse> CacheNodeClient::telemetry(
    const std::string& address, const v1::GetTelemetryRequest& request) {
  return call(address, "GetTelemetry", &v1::CacheNode::Stub::GetTelemetry, request);
}

}  // namespace granary::op
