// Fetches that run beside the read that asked for them: a reader of a chunk that another node
// keeps will want the next one, and fetching it now keeps the wire busy while the reader consumes
// this one. Each runs on a thread of its own; at most `limit` run at once, and a key already
// running is not started again (the fetch shares its flight anyway). The destructor waits for
// those running: declare it after what they use.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <set>
#include <string>
#include <thread>

#include "common/thread_annotations.h"

namespace granary::cache {

class ReadAhead {
 public:
  explicit ReadAhead(int limit) : limit_(limit) {}
  ~ReadAhead() {
    MutexLock lock(mutex_);
    ended_.wait(lock, [this]() GRANARY_REQUIRES(mutex_) { return running_.empty(); });
  }
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // Runs `fetch` unless `limit` run already or `key` does; whether it started.
  bool start(const std::string& key, std::function<void()> fetch) {
    {
      MutexLock lock(mutex_);
      if (static_cast<int>(running_.size()) >= limit_ || !running_.insert(key).second) return false;
    }
    std::thread([this, key, fetch = std::move(fetch)] {
      fetch();
      MutexLock lock(mutex_);
      running_.erase(key);
      ended_.notify_all();
    }).detach();
    return true;
  }

 private:
  const int limit_;
  Mutex mutex_;
  std::condition_variable_any ended_;  // waits on mutex_
  std::set<std::string> running_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::cache
