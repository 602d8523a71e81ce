// A Dataset's status from what its cache nodes report: phase, totals, cached share, warm rate
// and ETA, per-node figures, hit ratio, origin bytes, and the Ready condition. Pure.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/kube/object.h"

namespace granary::op {

enum class DatasetPhase { kPending, kListing, kWarming, kReady, kDegraded, kFailed };
std::string phaseName(DatasetPhase phase);

// One node's report of one dataset generation (the CacheNode API's DatasetStatus).
struct NodeProgress {
  DatasetPhase phase = DatasetPhase::kPending;
  std::string message;
  int64_t totalFiles = 0, totalBytes = 0;    // the whole dataset
  int64_t ownedFiles = 0, ownedBytes = 0;    // this node's share
  int64_t cachedFiles = 0, cachedBytes = 0;  // of the share, verified
  double bytesPerSecond = 0;
  int64_t etaSeconds = -1;  // -1: unknown
  std::optional<std::chrono::system_clock::time_point> warmStart;
  int64_t originBytes = 0, chunkHits = 0, chunkMisses = 0;
  int64_t capacityBytes = 0;
};

struct NodeReport {
  std::string nodeName;
  std::optional<NodeProgress> progress;  // unset: the node could not be asked
  std::string error;                     // why not
};

struct DatasetObservation {
  int64_t generation = 0;
  int32_t replicas = 1;
  std::vector<NodeReport> reports;  // one per node of the plan
  // The nodes were just told a new node set: a Ready in their answer predates it.
  bool replanned = false;
};

// The status for `observation`; conditions are carried over from `previous` (the current
// status), so an unchanged world yields an equal status. Nodes that `previous` lists for this
// generation and the plan no longer has are lost: the Dataset stays Degraded, still listing
// them, until the remaining nodes are Ready.
kube::Json datasetStatus(const DatasetObservation& observation, const kube::Json& previous,
                         std::chrono::system_clock::time_point now);

// The status when the nodes cannot be asked at all (bad spec, missing Secret, no cache node):
// `phase` and a Ready=False condition with `reason` and `message`; the figures of `previous`
// stay.
kube::Json problemStatus(const kube::Json& previous, int64_t generation, DatasetPhase phase,
                         const std::string& reason, const std::string& message,
                         std::chrono::system_clock::time_point now);

}  // namespace granary::op
