// What the node was asked to hold: the last EnsureDataset request of each dataset generation and
// view, in the order each first came, less what was purged. A node replaced by a new process
// hands it over (handover.h), and the new process ensures each again before it serves, so that
// the mounts its readers wait on are served at once rather than when the operator calls again.
//
// The requests carry the origins' credentials: they go to the successor over the hand-over
// socket only, never to a log or a file.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/thread_annotations.h"
#include "granary/v1/cache_node.pb.h"

namespace granary::cache {

class EnsuredRecord {
 public:
  // Records a request the engine accepted (replacing the last one of its generation).
  void ensured(const v1::EnsureDatasetRequest& request);
  // Forgets what a purge removed: the generation named, or every one of namespace/name.
  void purged(const v1::DatasetRef& dataset, bool allGenerations);
  // The requests, serialized, in the order their generations were first ensured (a view after
  // its source).
  std::vector<std::string> serialized() const;

 private:
  mutable Mutex mutex_;
  // (namespace/name, generation) with the serialized request, in order.
  std::vector<std::pair<std::pair<std::string, int64_t>, std::string>> requests_
      GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::cache
