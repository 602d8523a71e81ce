// The operator's client of the granary-cache-node API (gRPC, bearer token, optional TLS), one
// channel per node address, reused. Every call has a deadline. Errors: Unavailable or
// DeadlineExceeded when the node cannot be reached (retry), InvalidArgument naming the field
// the node rejected, NotFound for a dataset the node does not hold, Unauthenticated for a
// wrong token. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/result.h"
#include "common/secret.h"
#include "common/thread_annotations.h"
#include "granary/v1/cache_node.grpc.pb.h"
#include "operator/core/dataset_refresh.h"
#include "operator/core/dataset_status.h"

namespace granary::op {

struct CacheNodeClientOptions {
  Secret token;           // sent as "authorization: Bearer <token>"
  std::string tlsCaFile;  // PEM of the CA of the nodes' certificates; "": plain connections
  std::chrono::milliseconds timeout{10'000};  // per call
  // Counts calls by {method, code} (declareCacheNodeRequests); unset counts nothing.
  std::optional<CounterFamily> requests;
};

// granary_operator_cache_node_requests_total{method, code}.
Result<CounterFamily> declareCacheNodeRequests(MetricsRegistry& registry);

class CacheNodeClient {
 public:
  explicit CacheNodeClient(CacheNodeClientOptions options);
  ~CacheNodeClient();

  Result<NodeProgress> ensure(const std::string& address, const v1::EnsureDatasetRequest& request);
  Result<NodeProgress> status(const std::string& address, const v1::DatasetRef& dataset);
  // Bytes freed. NotFound when the node holds nothing of it.
  Result<int64_t> purge(const std::string& address, const v1::DatasetRef& dataset,
                        bool allGenerations);
  // Every dataset generation the node holds.
  struct Held {
    v1::DatasetRef dataset;
    NodeProgress progress;
  };
  Result<std::vector<Held>> list(const std::string& address);
  // Asks for a refresh of `dataset` into version `next`, or how it stands (RefreshDataset).
  Result<v1::RefreshDatasetResponse> refresh(const std::string& address,
                                             const v1::DatasetRef& dataset, int64_t next);
  Status setWarmPlan(const std::string& address, const v1::SetWarmPlanRequest& request);
  Result<v1::GetTelemetryResponse> telemetry(const std::string& address,
                                             const v1::GetTelemetryRequest& request);
  Status setCheckpointPeers(const std::string& address,
                            const v1::SetCheckpointPeersRequest& request);

 private:
  template <typename Request, typename Response>
  using Rpc = grpc::Status (v1::CacheNode::Stub::*)(grpc::ClientContext*, const Request&,
                                                    Response*);
  // One unary call with the deadline and the token, counted; errors name the node.
  template <typename Request, typename Response>
  Result<Response> call(const std::string& address, const char* method, Rpc<Request, Response> rpc,
                        const Request& request);
  v1::CacheNode::Stub& stubFor(const std::string& address);

  CacheNodeClientOptions options_;
  std::string caPem_;
  Mutex mutex_;
  std::map<std::string, std::unique_ptr<v1::CacheNode::Stub>> stubs_ GRANARY_GUARDED_BY(mutex_);
};

// One node's DatasetStatus in the operator's terms.
NodeProgress progressOf(const v1::DatasetStatus& status);
// A RefreshDatasetResponse (not STATE_ELSEWHERE) from the node `node`, in the operator's terms.
RefreshAnswer refreshAnswerOf(const v1::RefreshDatasetResponse& response, const std::string& node);

}  // namespace granary::op
