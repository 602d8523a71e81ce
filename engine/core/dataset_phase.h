// A dataset generation's phase on a node, and what a finished warm pass makes of it. Pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "common/api/dataset.h"

namespace granary::cache {

// What a dataset generation on this node is doing. Every phase but kPending, kListing and kFailed
// serves reads (a miss is read through from a peer or the origin).
//   kReady:     every file of this node's owned share is cached and verified.
//   kOnDemand:  not warmed by policy (warm: Never; OnJob before a plan asked for warming; paused):
//               files are cached as they are read. Turns kReady once reads cached the share.
//   kQuotaFull: the quota filled before the owned share was cached (Pin stops there; LRU keeps
//               the most recently used): what is cached stays, the rest comes from the origin.
// The phases are a Dataset's own (common/api/dataset.h): the operator combines its nodes' into
// the Dataset's status.phase.
using Phase = api::DatasetPhase;

inline std::string_view phaseName(Phase phase) { return api::datasetPhaseName(phase); }

// Up to three of `paths`, comma-separated, with ", ..." when there are more: what a status
// message names of a longer list.
std::string someOf(const std::set<std::string>& paths);

// Whether warming has nothing left to do in `phase` until something changes (a plan, the node
// set, room on disk): every phase but kPending, kListing and kWarming.
bool phaseSettled(Phase phase);
// Whether `phase` is what the dataset's policy and quota allow when nothing failed: kReady,
// kOnDemand or kQuotaFull.
bool phaseAsConfigured(Phase phase);

// The owned share against the quota, as a pass or a read left it.
struct ShareFacts {
  int64_t ownedFiles = 0, ownedBytes = 0;
  int64_t cachedFiles = 0, cachedBytes = 0;  // of the owned share, complete and verified
  int64_t capacityBytes = 0;                 // the dataset's quota on this node
  bool capacityReached = false;              // the eviction policy refused a chunk
  bool evictedForRoom = false;               // chunks were given up for a disk that filled
  bool pin = true;                           // Pin (false: LRU)
};

// Why kQuotaFull: which limit stopped caching (the quota, or the disk before it), what is
// cached, and the fix (raise spec.cache.capacityPerNode; with Pin, or use LRU).
std::string quotaFullMessage(const ShareFacts& share);

// What the warm pass found.
struct PassFacts {
  std::set<std::string> changedFiles;  // changed at the origin since listing
  bool diskFull = false;               // a chunk found no room on the cache directories
  int64_t failedChunks = 0;            // fetches that failed otherwise
  bool retriesLeft = false;            // failed chunks may be tried again
  std::string lastError;
  ShareFacts share;
};

enum class AfterPass {
  kDone,           // settled in the phase given
  kRetry,          // the same pass again after a backoff (failed chunks)
  kRetryWhenRoom,  // the same pass again after a backoff, until the disk has room
};

struct PassOutcome {
  Phase phase = Phase::kWarming;
  std::string message;
  AfterPass next = AfterPass::kDone;
};

// In order: files changed at the origin (kDegraded, naming them); a full disk (kDegraded, tried
// again when room returns); failed chunks (retried while retriesLeft, then kDegraded); an owned
// share not all cached: kQuotaFull where the quota or the disk said no (or retries are spent),
// otherwise the pass again (files another path was still fetching when it ended); else kReady.
PassOutcome judgePass(const PassFacts& facts);

}  // namespace granary::cache
