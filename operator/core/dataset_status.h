// A Dataset's status from what its cache nodes report: phase, totals, cached share, warm rate
// and ETA, per-node figures, hit ratio, origin bytes, and the Ready condition. Pure.
//
// The figures are what the nodes hold: cachedBytes and cachedFiles are the sum of what every
// node has verified on disk (divided by the copies when replicas > 1), cachedPercentage is that
// share of the bytes the nodes own. A dataset is Ready only when every node of the set is.
//
// The nodes' phases combine, first match wins:
//   no node in the set                  → Pending    (NoCacheNodes)
//   a node Failed                       → Failed     (NodeFailed)
//   a node unreachable                  → Degraded   (NodeUnreachable)
//   a node Degraded                     → Degraded   (NodeDegraded)
//   every node Ready                    → Ready      (Cached)
//   a node of the set lost              → Degraded   (NodeLost)
//   a node QuotaFull                    → QuotaFull  (CacheQuotaFull)
//   a node Pending or Listing           → Listing    (Listing)
//   a node Warming                      → Warming    (Warming)
//   a node OnDemand (the rest Ready)    → OnDemand   (NotWarmedByPolicy)
// So what needs a person comes first, then what needs a setting changed (QuotaFull), then what
// time will fix (Warming), then what policy chose (OnDemand).
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/api/dataset.h"
#include "common/kube/object.h"

namespace granary::op {

using api::DatasetPhase;

// A pod whose view of the dataset ended on a node: its reads fail until it is restarted.
struct CutOffPod {
  std::string podNamespace, podName, podUid;
  std::chrono::system_clock::time_point since;

  bool operator==(const CutOffPod&) const = default;
};

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
  std::vector<CutOffPod> cutOff;  // pods on this node whose view of the dataset ended
  int readers = 0;                // pods on this node whose volumes read this generation
  // Files of this generation the origin no longer has as listed, found by failed reads.
  std::vector<std::string> goneFromOrigin;
};

struct NodeReport {
  std::string nodeName;
  std::optional<NodeProgress> progress;  // unset: the node could not be asked
  std::string error;                     // why not
};

// What a Dataset's status is derived from.
struct DatasetProgress {
  int64_t generation = 0;
  // The dataset's cache settings: replicas counts copies once; warm, policy and
  // capacityPerNode are named in the OnDemand and QuotaFull messages.
  api::CacheSpec cache;
  std::vector<NodeReport> reports;  // one per node of the set
  // The nodes were just told a new node set: a Ready in their answer predates it.
  bool replanned = false;
};

// The status for `progress`; conditions are carried over from `previous` (the current
// status), so an unchanged world yields an equal status. Pods a node reports cut off make the
// ReadersCutOff condition True (naming them, with the fix) and qualify the Ready condition's
// message; once none is, ReadersCutOff turns False (it is absent until it first happens). Nodes
// that `previous` lists for this generation and the set no longer has are lost: the Dataset stays
// Degraded, still listing them, until the remaining nodes are Ready.
kube::Json datasetStatus(const DatasetProgress& progress, const kube::Json& previous,
                         std::chrono::system_clock::time_point now);

// The status when the nodes cannot be asked at all (bad spec, missing Secret, no cache node):
// `phase` and a Ready=False condition with `reason` and `message`; the figures of `previous`
// stay.
kube::Json problemStatus(const kube::Json& previous, int64_t generation, DatasetPhase phase,
                         const std::string& reason, const std::string& message,
                         std::chrono::system_clock::time_point now);

// The node names status.nodes lists.
std::set<std::string> nodesListedIn(const kube::Json& status);

// status.phase of a status; nullopt when it has none (never written) or an unknown one.
std::optional<DatasetPhase> phaseOfStatus(const kube::Json& status);

}  // namespace granary::op
