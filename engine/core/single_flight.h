// Concurrent misses on one chunk share one fetch: the first caller for a key runs the fetch,
// later callers for the same key wait for its result instead of fetching again. Once a fetch
// finishes, the next call for the key starts a new one. Thread-safe.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "common/thread_annotations.h"

namespace granary::cache {

template <typename T>
class SingleFlight {
 public:
  // Returns the result of `fetch`, run by this call or by the call already in flight for `key`.
  Result<T> run(const std::string& key, const std::function<Result<T>()>& fetch) {
    std::shared_ptr<Call> call;
    bool leader = false;
    {
      MutexLock lock(mutex_);
      auto& slot = inFlight_[key];
      if (!slot) {
        slot = std::make_shared<Call>();
        leader = true;
      }
      call = slot;
      ++call->waiters;
    }
    if (leader) {
      Result<T> result = fetch();
      MutexLock lock(mutex_);
      call->result.emplace(std::move(result));
      inFlight_.erase(key);
      call->done.notify_all();
    }
    MutexLock lock(mutex_);
    call->done.wait(lock, [&] { return call->result.has_value(); });
    return *call->result;
  }

  // Calls currently in flight (for tests and metrics).
  size_t inFlight() const {
    MutexLock lock(mutex_);
    return inFlight_.size();
  }

  // Callers that joined the call in flight for `key` (0 when none is in flight).
  int waiters(const std::string& key) const {
    MutexLock lock(mutex_);
    const auto it = inFlight_.find(key);
    return it == inFlight_.end() ? 0 : it->second->waiters;
  }

 private:
  // Read and written with mutex_ held (the analysis cannot name another object's mutex here).
  struct Call {
    std::condition_variable_any done;  // waits on mutex_
    std::optional<Result<T>> result;
    int waiters = 0;
  };
  mutable Mutex mutex_;
  std::map<std::string, std::shared_ptr<Call>> inFlight_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::cache
