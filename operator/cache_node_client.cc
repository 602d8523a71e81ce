#include "operator/cache_node_client.h"

#include <grpcpp/grpcpp.h>

#include <fstream>
#include <iterator>

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
  return out;
}

CacheNodeClient::CacheNodeClient(CacheNodeClientOptions options) : options_(std::move(options)) {
  if (!options_.tlsCaFile.empty()) {
    std::ifstream in(options_.tlsCaFile);
    caPem_.assign(std::istreambuf_iterator<char>(in), {});
  }
}

CacheNodeClient::~CacheNodeClient() = default;

v1::CacheNode::Stub& CacheNodeClient::stubFor(const std::string& address) {
  std::lock_guard lock(mutex_);
  auto& stub = stubs_[address];
  if (!stub) {
    auto credentials = options_.tlsCaFile.empty()
                           ? grpc::InsecureChannelCredentials()
                           : grpc::SslCredentials({.pem_root_certs = caPem_});
    stub = v1::CacheNode::NewStub(grpc::CreateChannel(address, credentials));
  }
  return *stub;
}

void CacheNodeClient::prepare(grpc::ClientContext& context) const {
  context.set_deadline(std::chrono::system_clock::now() + options_.timeout);
  context.AddMetadata("authorization", "Bearer " + options_.token.reveal());
}

Result<NodeProgress> CacheNodeClient::ensure(const std::string& address,
                                             const v1::EnsureDatasetRequest& request) {
  grpc::ClientContext context;
  prepare(context);
  v1::EnsureDatasetResponse response;
  const grpc::Status status = stubFor(address).EnsureDataset(&context, request, &response);
  if (!status.ok()) return fromNode(address, status);
  return progressOf(response.status());
}

Result<NodeProgress> CacheNodeClient::status(const std::string& address,
                                             const v1::DatasetRef& dataset) {
  grpc::ClientContext context;
  prepare(context);
  v1::GetDatasetStatusRequest request;
  *request.mutable_dataset() = dataset;
  v1::DatasetStatus response;
  const grpc::Status status = stubFor(address).GetDatasetStatus(&context, request, &response);
  if (!status.ok()) return fromNode(address, status);
  return progressOf(response);
}

Result<int64_t> CacheNodeClient::purge(const std::string& address, const v1::DatasetRef& dataset,
                                       bool allGenerations) {
  grpc::ClientContext context;
  prepare(context);
  v1::PurgeDatasetRequest request;
  *request.mutable_dataset() = dataset;
  request.set_all_generations(allGenerations);
  v1::PurgeDatasetResponse response;
  const grpc::Status status = stubFor(address).PurgeDataset(&context, request, &response);
  if (!status.ok()) return fromNode(address, status);
  return response.freed_bytes();
}

Result<std::vector<v1::DatasetRef>> CacheNodeClient::list(const std::string& address) {
  grpc::ClientContext context;
  prepare(context);
  v1::ListDatasetsResponse response;
  const grpc::Status status =
      stubFor(address).ListDatasets(&context, v1::ListDatasetsRequest(), &response);
  if (!status.ok()) return fromNode(address, status);
  std::vector<v1::DatasetRef> out;
  for (const auto& d : response.datasets()) out.push_back(d.dataset());
  return out;
}

Status CacheNodeClient::setWarmPlan(const std::string& address,
                                    const v1::SetWarmPlanRequest& request) {
  grpc::ClientContext context;
  prepare(context);
  v1::SetWarmPlanResponse response;
  const grpc::Status status = stubFor(address).SetWarmPlan(&context, request, &response);
  return status.ok() ? Status::ok() : fromNode(address, status);
}

Result<v1::GetTelemetryResponse> CacheNodeClient::telemetry(
    const std::string& address, const v1::GetTelemetryRequest& request) {
  grpc::ClientContext context;
  prepare(context);
  v1::GetTelemetryResponse response;
  const grpc::Status status = stubFor(address).GetTelemetry(&context, request, &response);
  if (!status.ok()) return fromNode(address, status);
  return response;
}

}  // namespace granary::op
