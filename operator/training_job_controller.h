// The TrainingJob controller: observes a job, its worker pods and its Datasets (all from
// informer caches), plans with planJob (operator/core/job_lifecycle.h) and applies the plan: the
// headless Service, worker pods created or deleted, the job deleted after its TTL, status
// written only when it changed, and Events. While a job runs it samples the telemetry of the
// cache nodes its workers read through, every telemetryInterval, into status.data and
// status.gpu (operator/core/job_data.h), exported as granary_job_* series (operator/job_series.h).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "common/api/rendezvous_notice.h"
#include "common/kube/manager.h"
#include "common/names.h"
#include "common/origin_roots.h"
#include "common/thread_annotations.h"
#include "operator/cache_node_client.h"
#include "operator/cache_node_discovery.h"
#include "operator/core/job_data.h"
#include "operator/core/job_lifecycle.h"
#include "operator/job_series.h"

namespace granary::op {

struct TrainingJobControllerOptions {
  int workers = 4;                 // concurrent reconciles
  std::string ns;                  // the namespace of the TrainingJobs watched; "" for all
  std::string cacheNodeNamespace;  // of the cache-node pods; "" for all
  // The cache nodes to sample (and the selector of their pods); null: no telemetry in status.
  CacheNodeClient* cacheNodes = nullptr;
  std::string cacheNodeSelector = names::kCacheNodeSelector;
  std::chrono::milliseconds telemetryInterval{20'000};
  // granary_job_* of each running job with telemetry (declareJobSeries); unset: none.
  std::optional<JobSeries> series;
  // The cache nodes' checkpointOriginRoots (cacheNode.checkpointOriginRoots): a job whose file://
  // spec.checkpoints.uri they refuse gets the CheckpointUriRefused condition and a Warning Event.
  // Unset: unknown, no condition.
  std::optional<std::vector<OriginRoot>> checkpointRoots;
  // The key each elastic job's notice token is derived from (api::rendezvousNoticeToken), held by
  // the operator alone; the same key across restarts keeps the stores an earlier process made
  // reachable. Empty: a random key of this process.
  std::string rendezvousKey;
  // Tells an elastic job's rendezvous store (host:port) which agents are gone
  // (api::rendezvousNotice); api::sendRendezvousNotice unless a test replaces it.
  // The token (api::rendezvousNoticeToken of the job) goes with each notice; never logged.
  std::function<Status(const std::string& address, const std::string& notice,
                       const std::string& token)>
      tellRendezvous = [](const std::string& address, const std::string& notice,
                          const std::string& token) {
        return api::sendRendezvousNotice(address, notice, token);
      };
};

class TrainingJobController {
 public:
  TrainingJobController(kube::Manager& manager, TrainingJobControllerOptions options = {},
                        Clock& clock = realClock());

  Result<kube::ReconcileResult> reconcile(const std::string& key);

 private:
  struct Summaries {
    kube::Json data, gpu;    // status.data and status.gpu; null when there is nothing to say
    kube::Json checkpoints;  // status.checkpoints (core/job_checkpoints.h); null likewise
  };
  // What the job's status shows of its workers' telemetry: a new sample when the last is
  // telemetryInterval old, summarized against the last one; until then the summaries last
  // made (a reconcile from a cache that has not yet seen the status they were written to
  // must still show them, in the status and in the job's series). A summary with nothing to
  // say leaves the one before it standing; a job of another uid starts afresh.
  // A job with checkpoints gets an Event as its newest checkpoint at the origin changes.
  Summaries sampleTelemetry(const kube::Json& job, const std::string& key,
                            const api::TrainingJobSpec& spec,
                            const std::vector<WorkerState>& workers);
  // Tells each node of the job's checkpoint volume (`holding`: those that reported it) where to
  // copy its files (checkpointPeersOf) and which nodes its status names are lost, whose copies
  // the nodes upload. A node that cannot be told is told at the next sample.
  void assignCheckpointPeers(const kube::Json& job, const api::CheckpointVolume& checkpoints,
                             const std::vector<CacheNode>& holding,
                             const std::vector<CacheNode>& all);
  // Sets the job's CheckpointUriRefused condition (with checkpointRoots) and its
  // CheckpointUriShared condition (another running job of the namespace names the same uri), each
  // with a Warning Event as it turns True.
  void noteCheckpointUri(const kube::Json& job, const JobObservation& o, JobPlan& plan);
  // Sets the job's CheckpointDiskFull condition from status.checkpoints, with a Warning Event as
  // a disk fills.
  void noteCheckpointDisk(const kube::Json& job, int64_t generation, kube::Json& status);
  // An elastic job's rendezvous store pod and Service (operator/core/workers.h), created
  // when missing, as a gang attempt starts.
  void tellRendezvous(const kube::Json& job, int attempt, const std::vector<std::string>& workers);
  Status ensureRendezvous(const kube::Json& job);

  kube::Manager& manager_;
  TrainingJobControllerOptions options_;
  Clock& clock_;
  std::optional<CacheNodeDirectory> directory_;  // set with options_.cacheNodes
  kube::Informer* jobs_;
  kube::Informer* pods_;
  kube::Informer* services_;
  kube::Informer* datasets_;
  kube::Informer* nodes_;  // whether a worker's node is lost
  // The gang attempt last written per job key (with the job's uid): a cache that has not yet
  // seen the write must not act on the older attempt (it would recreate the workers just
  // deleted). Forgotten when the job is gone.
  struct Written {
    std::string uid;
    int64_t attempt = 0;
  };
  Mutex mutex_;
  std::map<std::string, Written> attempts_ GRANARY_GUARDED_BY(mutex_);
  // The last telemetry sample per job key (of the job with `uid`), and the summaries shown since.
  struct Telemetry {
    std::string uid;
    JobSample sample;
    Summaries shown;
  };
  std::map<std::string, Telemetry> telemetry_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::op
