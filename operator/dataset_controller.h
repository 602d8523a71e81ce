// The Dataset controller: chooses each Dataset's cache nodes, asks every one of them to ensure
// the dataset (credentials from the Secret the Dataset names, in its own namespace, sent only
// over the authenticated cache-node API), polls their progress into status, records Events on
// phase changes and errors, re-plans when a node goes, and purges the caches through a
// finalizer when the Dataset is deleted (giving up on unreachable nodes after purgeTimeout).
//
// Status is written only when it changed. A node is asked to ensure again when the request
// for it changed, when it no longer holds the dataset, or after reensureInterval (so rotated
// credentials reach it); otherwise it is only asked for status. Each node is also told the
// dataset's readers (operator/core/readers.h) whenever they change, so that an OnJob dataset
// warms once a job's workers are placed.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "common/kube/manager.h"
#include "operator/cache_node_client.h"
#include "operator/core/node_set.h"

namespace granary::op {

struct DatasetControllerOptions {
  // Polls of a Dataset's nodes while it is not Ready, and once it is. Defaults 5 s and 30 s.
  std::chrono::milliseconds pollWarming{5'000};
  std::chrono::milliseconds pollReady{30'000};
  // Ensure again at least this often (credentials rotate). Default 10 min.
  std::chrono::milliseconds reensureInterval{600'000};
  // After a deletion, nodes that cannot be reached this long are given up. Default 2 min.
  std::chrono::milliseconds purgeTimeout{120'000};
  int workers = 4;
  std::string ns;                  // the namespace of the Datasets watched; "" for all
  std::string cacheNodeNamespace;  // of the cache-node pods; "" for all
};

class DatasetController {
 public:
  // Registers informers (Datasets; cache-node pods matching `agentSelector`; Nodes) and the
  // controller with `manager`. `nodes` must outlive the manager's run.
  DatasetController(kube::Manager& manager, CacheNodeClient& nodes,
                    const std::string& agentSelector, DatasetControllerOptions options = {},
                    Clock& clock = realClock());

  Result<kube::ReconcileResult> reconcile(const std::string& key);

 private:
  struct Ensured {
    size_t fingerprint = 0;  // of the EnsureDataset request, without credentials
    Clock::MonoTime at{};
    size_t warmPlan = 0;  // of the SetWarmPlan request the node last accepted
  };

  Result<kube::ReconcileResult> finalize(const kube::Json& dataset);
  // Writes `status` when it differs from the object's; records an Event on a phase change.
  Status writeStatus(const kube::Json& dataset, kube::Json status);
  std::vector<CacheNode> cacheNodes();
  // Drops generations of the dataset other than `current` from a node (best effort: one still
  // mounted by a pod stays until the next ensure).
  // Sends `plan` (the dataset's readers) to the node at `address` unless it already has it.
  void announceReaders(const std::string& memo, const std::string& address,
                       const v1::SetWarmPlanRequest& plan, size_t fingerprint);
  void purgeOtherGenerations(const std::string& address, const v1::DatasetRef& current);

  kube::Manager& manager_;
  CacheNodeClient& nodes_;
  DatasetControllerOptions options_;
  Clock& clock_;
  kube::Informer* datasets_;
  kube::Informer* agents_;
  kube::Informer* workers_;  // TrainingJob worker pods, indexed by the datasets they mount
  kube::Informer* kubeNodes_;
  std::mutex mutex_;                        // guards ensured_
  std::map<std::string, Ensured> ensured_;  // by uid + node address
};

}  // namespace granary::op
