// The refreshes this node runs for the operator (RefreshDataset). Each lists a dataset's origins
// again on a thread of its own (CacheEngine::refresh), since listing a large origin takes
// minutes, and is asked how it stands until it ends. A refresh that ended is answered once: the
// next request starts another (the operator asks again only to refresh again). One refresh per
// dataset at a time: a request for another pair of versions stops the one running first.
//
// Nothing here survives the process: a node restarted (or replaced) mid-refresh has nothing of
// it, and the operator's next request starts it again from the start.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/thread_annotations.h"
#include "engine/engine.h"
#include "granary/v1/cache_node.pb.h"

namespace granary::cache {

class Refreshes {
 public:
  explicit Refreshes(CacheEngine& engine) : engine_(engine) {}
  ~Refreshes();  // stops every refresh and waits for it

  // How the refresh of `current` into version `next` stands, started when none runs. Another
  // node of the dataset's set lists `next`: STATE_ELSEWHERE, naming it, and nothing is started.
  // Errors: NotFound while `current` is not on this node.
  Result<v1::RefreshDatasetResponse> request(const DatasetKey& current, int64_t next);

 private:
  struct Refresh {
    int64_t current = 0, next = 0;  // the generations
    std::atomic<int64_t> listed{0};
    Mutex mutex;
    std::optional<Result<ManifestChanges>> outcome GRANARY_GUARDED_BY(mutex);
    std::jthread thread;  // last: stopped and joined first
  };

  std::unique_ptr<Refresh> start(const DatasetKey& current, int64_t next);

  CacheEngine& engine_;
  Mutex mutex_;
  std::map<std::string, std::unique_ptr<Refresh>> refreshes_
      GRANARY_GUARDED_BY(mutex_);  // by namespace/name/uid
};

}  // namespace granary::cache
