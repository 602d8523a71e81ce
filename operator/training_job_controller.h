// The TrainingJob controller: observes a job, its worker pods and its Datasets (all from
// informer caches), plans with planJob (operator/core/gang.h) and applies the plan: the
// headless Service, worker pods created or deleted, the job deleted after its TTL, status
// written only when it changed, and Events.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "common/kube/manager.h"

namespace granary::op {

struct TrainingJobControllerOptions {
  int workers = 4;  // concurrent reconciles
};

class TrainingJobController {
 public:
  TrainingJobController(kube::Manager& manager, TrainingJobControllerOptions options = {},
                        Clock& clock = realClock());

  Result<kube::ReconcileResult> reconcile(const std::string& key);

 private:
  kube::Manager& manager_;
  Clock& clock_;
  kube::Informer* jobs_;
  kube::Informer* pods_;
  kube::Informer* services_;
  kube::Informer* datasets_;
  // The gang attempt last written per job key (with the job's uid): a cache that has not yet
  // seen the write must not act on the older attempt (it would recreate the workers just
  // deleted). Forgotten when the job is gone.
  struct Written {
    std::string uid;
    int64_t attempt = 0;
  };
  std::mutex mutex_;
  std::map<std::string, Written> attempts_;
};

}  // namespace granary::op
