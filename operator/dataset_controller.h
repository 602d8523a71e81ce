// The Dataset controller: chooses each Dataset's cache nodes, asks every one of them to ensure
// the dataset (credentials from the Secret the Dataset names, in its own namespace, sent only
// over the authenticated cache-node API), polls their progress into status, records Events on
// phase changes and errors, re-plans when a node goes, purges the nodes the dataset left, and
// purges the caches through a finalizer when the Dataset is deleted (giving up on unreachable
// nodes after purgeTimeout).
//
// Each reconcile observes (the Dataset decoded once, the cache nodes from the informers, every
// node of the set asked for its status), plans with the pure planDataset
// (operator/core/dataset_plan.h) and applies the plan. Status is written only when it changed.
// A node is asked to ensure again when the request for it changed, when it no longer holds the
// dataset, or after reensureInterval (so rotated credentials reach it). Each node is also told
// the dataset's readers (operator/core/readers.h) whenever they change, so that an OnJob
// dataset warms once a job's workers are placed, or once a BeforeStart job waits for it.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "common/kube/manager.h"
#include "common/thread_annotations.h"
#include "operator/cache_node_client.h"
#include "operator/cache_node_discovery.h"
#include "operator/core/dataset_plan.h"
#include "operator/core/dataset_refresh.h"
#include "operator/core/node_set.h"
#include "operator/ensure_request.h"

namespace granary::op {

struct DatasetControllerOptions {
  // Polls of a Dataset's nodes while it is not settled, and once it is (Ready, OnDemand,
  // QuotaFull). Defaults 5 s and 30 s.
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
  // Registers informers (Datasets; cache-node pods matching `agentSelector`; Nodes; worker
  // pods and TrainingJobs, for the readers) and the controller with `manager`. `nodes` must
  // outlive the manager's run.
  DatasetController(kube::Manager& manager, CacheNodeClient& nodes,
                    const std::string& agentSelector, DatasetControllerOptions options = {},
                    Clock& clock = realClock());

  // Observe → planDataset (operator/core/dataset_plan.h) → apply. A spec the decoder or a node
  // rejects is a terminal error; an unreachable API server a retryable one.
  Result<kube::ReconcileResult> reconcile(const std::string& key);

 private:
  struct Ensured {
    size_t fingerprint = 0;  // of the EnsureDataset request, without credentials
    Clock::MonoTime at{};
    size_t warmPlan = 0;         // of the SetWarmPlan request the node last accepted
    bool othersRetired = false;  // no other version of the dataset is left on the node
  };
  // What the nodes of a dataset's set are asked this reconcile, and the fingerprints that tell
  // whether a node already has it.
  struct Requests {
    NodeSetPlan set;                // of every cache node, as the informers saw them
    v1::EnsureDatasetRequest bare;  // without credentials
    size_t fingerprint = 0;
    v1::SetWarmPlanRequest warmPlan;
    size_t warmPlanFingerprint = 0, noReaders = 0;
  };

  // `referrers`: the Datasets that refer to it and are offered to (their readers are its).
  Requests requestsFor(const kube::Json& object, const api::Dataset& dataset,
                       const std::vector<std::string>& referrers);
  // A Dataset that refers to another: planReference (operator/core/dataset_reference.h), then
  // the view ensured on its source's nodes, or dropped from every node when it is refused.
  Result<kube::ReconcileResult> reconcileReference(const kube::Json& object,
                                                   const api::Dataset& dataset);
  // Ensures the view on `node` unless the node holds it; the pods the node reports cut off from
  // the view.
  std::vector<CutOffPod> ensureView(const CacheNode& node, const v1::DatasetRef& ref,
                                    const api::DatasetReference& reference);
  // The referrers (offered to) of Dataset `source`, by key.
  std::vector<std::string> referrersOf(const kube::Json& source) const;
  // `keys` (of Datasets) and the keys of the Datasets those refer to.
  std::vector<std::string> withSources(std::vector<std::string> keys) const;
  // Everything planDataset reads; the nodes of the set are asked only with `requests`.
  DatasetObservation observe(const kube::Json& object, const Result<api::Dataset>& dataset,
                             const Requests* requests);
  // Reads the dataset's Secrets into `credentials`; NotFound names a missing Secret.
  Status readCredentials(const api::Dataset& dataset,
                         std::map<std::string, OriginCredentials>& credentials);
  // What a plan is applied with; all unset for a Dataset that could not be decoded (whose plan
  // only writes status).
  struct Applying {
    const api::Dataset* dataset = nullptr;
    const Requests* requests = nullptr;
    const std::map<std::string, OriginCredentials>* credentials = nullptr;
  };
  Result<kube::ReconcileResult> apply(const kube::Json& object, const DatasetPlan& plan,
                                      const Applying& with);
  // Sends EnsureDataset; a rejection (InvalidArgument) is returned, other failures are logged
  // and tried again at the next poll.
  Status ensure(const api::Dataset& dataset, const CacheNode& node, const Requests& requests,
                const std::map<std::string, OriginCredentials>& credentials);
  Result<kube::ReconcileResult> finalize(const kube::Json& dataset);
  // Writes `status` when it differs from the object's; then records `event`.
  Status writeStatus(const kube::Json& dataset, const kube::Json& status,
                     const std::optional<DatasetEvent>& event);
  // Marks each pod cut off from the dataset (names::kMountLostAnnotation) and names it in a
  // Warning Event on the pod and on the Dataset, once: a marked pod is left alone.
  void markCutOff(const kube::Json& dataset,
                  const std::vector<std::pair<std::string, CutOffPod>>& cutOff);
  // Sends `plan` (the dataset's readers) to the node at `address` unless it already has it.
  void announceReaders(const std::string& memo, const std::string& address,
                       const v1::SetWarmPlanRequest& plan, size_t fingerprint);
  // Versions (docs/operator.md, Refresh and versions): `plan` with the refresh's state, files
  // the nodes found gone from the origin named in Events, and, once the version served is
  // settled everywhere, the older versions nobody reads dropped.
  void followVersions(const kube::Json& object, const api::Dataset& dataset,
                      const Requests& requests, const DatasetObservation& observation,
                      const std::vector<std::string>& referrers, DatasetPlan& plan);
  // The refresh of the version served (operator/core/dataset_refresh.h): asked of the node that
  // lists the next version when one is due or running, and `plan`'s status with its state.
  RefreshStep refresh(const kube::Json& object, const api::Dataset& dataset,
                      const v1::DatasetRef& current, const NodeSetPlan& set,
                      const DatasetPlan& plan);
  // Asks the node of `set` that lists version ask.next (the node asked first names it when it
  // is another).
  Result<RefreshAnswer> askRefresh(const NodeSetPlan& set, const v1::DatasetRef& current,
                                   const RefreshAsk& ask);
  // The versions of the dataset that running TrainingJobs read (their status.datasetVersions),
  // through its own name or a referrer's.
  std::set<int64_t> pinnedVersions(const kube::Json& object,
                                   const std::vector<std::string>& referrers) const;
  // Once `current` is settled on every node of `set`: drops the dataset's other versions that no
  // pod of any node reads and that are not `kept` (the versions running jobs are pinned to).
  // A pod keeps the version it mounted; the next version takes the chunks of its unchanged files
  // from the one before while it warms. A node is asked only until none is left after each
  // ensure of it.
  void retireOtherVersions(const kube::Json& object, const NodeSetPlan& set,
                           const v1::DatasetRef& current, std::set<int64_t> kept);
  // A Warning Event naming the files of `version` the origin no longer has that a node reports
  // and no Event named yet (goneFromOriginEvent).
  void reportGoneFromOrigin(const kube::Json& dataset, int64_t version,
                            const std::vector<std::string>& paths);
  void recordEvent(const kube::Json& dataset, const DatasetEvent& event);
  void forget(const std::string& memo);

  kube::Manager& manager_;
  CacheNodeClient& nodes_;
  DatasetControllerOptions options_;
  Clock& clock_;
  CacheNodeDirectory cacheNodes_;
  kube::Informer* datasets_;
  kube::Informer* workers_;  // TrainingJob worker pods, indexed by the datasets they mount
  kube::Informer* jobs_;     // TrainingJobs, indexed by the datasets they name
  Mutex mutex_;
  // By uid + "/" + node address.
  std::map<std::string, Ensured> ensured_ GRANARY_GUARDED_BY(mutex_);
  // uid/version/path of each file named gone from the origin by an Event.
  std::set<std::string> reportedGone_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::op
