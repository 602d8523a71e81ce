// Which dataset warms first on a node. Every dataset whose warm pass runs holds a Turn with its
// priority (SetWarmPlan's `priority`, higher first); before each warm fetch its workers wait until
// no dataset of a higher priority holds one, so that the warm worker slots and the origin
// bandwidth the node's limiter hands out go to the highest priority warming. Datasets of equal
// priority warm side by side. Demand reads never wait here.
//
// A higher priority holds the lower ones back only while it can use what they would take: one
// whose warm fetch waits for the dataset's own bandwidth limit (spec.cache.bandwidthLimit) goes
// no faster for their waiting, so they may fetch meanwhile. A fetch that started is not stopped.
//
// Thread-safety: every method may be called from any thread. A Turn must not outlive its
// WarmPriorities.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <stop_token>

#include "common/thread_annotations.h"

namespace granary::cache {

class WarmPriorities {
 public:
  // A dataset's place while its warm pass runs: held from the pass's start to its end.
  class Turn {
   public:
    Turn() = default;
    Turn(Turn&& other) noexcept;
    Turn& operator=(Turn&& other) noexcept;
    ~Turn();
    // A new priority for the pass in progress (the plan changed).
    void setPriority(int priority);
    // Waits until no other holder has a higher priority. False when `stop` ended the wait.
    bool wait(std::stop_token stop) const;
    // Whether a fetch of this holder may go now.
    bool mayGo() const;
    // A fetch of this holder starts (true) or ends (false) a wait for its dataset's own bandwidth
    // limit; while any does, the holder does not hold lower priorities back. Calls pair up.
    void waitingForOwnLimit(bool waiting);

   private:
    friend class WarmPriorities;
    Turn(WarmPriorities* owner, uint64_t id) : owner_(owner), id_(id) {}
    WarmPriorities* owner_ = nullptr;
    uint64_t id_ = 0;
  };

  WarmPriorities() = default;
  WarmPriorities(const WarmPriorities&) = delete;
  WarmPriorities& operator=(const WarmPriorities&) = delete;

  Turn enter(int priority);
  // How many turns are held: the passes taking part now.
  size_t holders() const;

 private:
  void leave(uint64_t id) GRANARY_EXCLUDES(mutex_);
  void set(uint64_t id, int priority) GRANARY_EXCLUDES(mutex_);
  void addOwnLimitWaits(uint64_t id, int change) GRANARY_EXCLUDES(mutex_);
  bool mayGoLocked(uint64_t id) const GRANARY_REQUIRES(mutex_);

  mutable Mutex mutex_;
  mutable std::condition_variable_any changed_;  // waits on mutex_: a holder left or changed
  struct Holder {
    int priority = 0;
    int ownLimitWaits = 0;  // its fetches waiting for the dataset's own bandwidth limit
  };
  std::map<uint64_t, Holder> holders_ GRANARY_GUARDED_BY(mutex_);  // by turn id
  uint64_t nextId_ GRANARY_GUARDED_BY(mutex_) = 1;
};

}  // namespace granary::cache
