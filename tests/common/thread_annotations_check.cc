// Compiled by clang alone (-fsyntax-only -Wthread-safety; tests/CMakeLists.txt), to show that the
// analysis is live: this file compiles as it is, and fails with GRANARY_UNGUARDED_READ defined,
// which reads a guarded member without its mutex.
#include <condition_variable>

#include "common/thread_annotations.h"

namespace granary {

class Counter {
 public:
  void add() GRANARY_EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    addLocked();
  }
  int waitForAny() GRANARY_EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    changed_.wait(lock, [this]() GRANARY_REQUIRES(mutex_) { return count_ > 0; });
    return count_;
  }
#ifdef GRANARY_UNGUARDED_READ
  int peek() const { return count_; }
#endif

 private:
  void addLocked() GRANARY_REQUIRES(mutex_) {
    ++count_;
    changed_.notify_all();
  }

  mutable Mutex mutex_;
  std::condition_variable_any changed_;
  int count_ GRANARY_GUARDED_BY(mutex_) = 0;
};

int use() {
  Counter counter;
  counter.add();
  return counter.waitForAny();
}

}  // namespace granary
