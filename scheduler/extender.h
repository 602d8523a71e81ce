// The kube-scheduler extender: the same filters and locality scores for clusters that keep
// the default scheduler. Wire format as kube-scheduler sends it (Go field names, no tags):
//   POST <prefix>/filter      {"Pod":{..},"Nodes":{"items":[..]}|null,"NodeNames":[..]|null}
//     → {"Nodes":{"items":[..]}|null,"NodeNames":[..]|null,"FailedNodes":{..},
//        "FailedAndUnresolvableNodes":{..},"Error":""}
//   POST <prefix>/prioritize  (same arguments) → [{"Host":"n1","Score":0..10}]
// NodeNames are answered from granary's own node cache (nodeCacheCapable: true).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/kube/object.h"
#include "scheduler/core/cluster_state.h"
#include "scheduler/core/placement.h"

struct mg_context;

namespace granary::scheduler {

// What a pod's job reads: its datasets' caches and the locality it requires.
struct PodData {
  std::vector<DatasetCache> datasets;
  api::Locality locality = api::Locality::kPreferred;
};
using PodDataLookup = std::function<PodData(const kube::Json& pod)>;

class Extender {
 public:
  Extender(const ClusterState& state, PodDataLookup lookup)
      : state_(state), lookup_(std::move(lookup)) {}

  // Pure request → response; a malformed request gets a response with "Error" set.
  kube::Json filter(const kube::Json& args) const;
  kube::Json prioritize(const kube::Json& args) const;

 private:
  const ClusterState& state_;
  PodDataLookup lookup_;
};

// Serves an Extender over HTTP (civetweb). Stops when destroyed.
class ExtenderServer {
 public:
  // `address` is host:port (port 0 picks one). Unavailable when it cannot be bound.
  static Result<std::unique_ptr<ExtenderServer>> start(const std::string& address,
                                                       const Extender& extender);
  ~ExtenderServer();
  int port() const { return port_; }

 private:
  ExtenderServer() = default;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace granary::scheduler
