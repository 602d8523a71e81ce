// How many pods' volumes read each dataset generation on this node, as the mount table bound
// them: a pod keeps the generation its volume was given for its life, so the operator keeps a
// version while any pod reads it (the count is in each generation's status).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "common/thread_annotations.h"

namespace granary::cache {

class GenerationReaders {
 public:
  using Generation = std::tuple<std::string, std::string, int64_t>;  // namespace, name, generation

  // Replaces the counts with `counts` (the pods bound to each generation).
  void set(std::map<Generation, int> counts) {
    MutexLock lock(mutex_);
    counts_ = std::move(counts);
  }
  int of(const Generation& generation) const {
    MutexLock lock(mutex_);
    const auto it = counts_.find(generation);
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  mutable Mutex mutex_;
  std::map<Generation, int> counts_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::cache
