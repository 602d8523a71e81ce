// What a TrainingJob's status says of its checkpoints (spec.checkpoints), from the checkpoint
// volume each of its workers' nodes reports (GetTelemetry). Pure.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/kube/object.h"
#include "operator/core/conditions.h"

namespace granary::op {

// One checkpoint of a node's volume: a top-level directory (or file) of the tree.
struct CheckpointOnNode {
  std::string name;
  int64_t files = 0;
  int64_t bytes = 0;
  bool atOrigin = false;  // every file of it
};

// One node's report of the job's volume.
struct CheckpointVolumeReport {
  std::string node;
  int64_t pendingFiles = 0;  // closed, not at the origin yet
  int64_t pendingBytes = 0;
  double uploadLagSeconds = 0;
  std::string lastError;                      // the drain's last failed step
  std::vector<CheckpointOnNode> checkpoints;  // newest first
  bool diskFull = false;                      // the volume's disk (saves fail with ENOSPC)
  int64_t diskFreeBytes = 0;
};

// status.checkpoints: `newest` (the newest checkpoint any node holds), `newestAtOrigin` (the
// newest whose every file is at the origin; absent while none is), pendingFiles and
// pendingBytes (summed over the nodes), uploadLagSeconds (the largest), lastError (a node's,
// prefixed with it) and `items`: the newest kCheckpointItems checkpoints, each with the nodes
// holding it, its files and bytes (the largest any node reports) and whether it is at the
// origin. A checkpoint's place is its best place in any node's list; `fullDisks`, the nodes whose
// volume's disk is full, each with its free bytes (absent when none is). Null without reports.
inline constexpr size_t kCheckpointItems = 5;
kube::Json checkpointSummary(const std::vector<CheckpointVolumeReport>& reports);

// The job's CheckpointDiskFull condition from its status.checkpoints: True (reason DiskFull)
// naming the nodes whose disk is full and what to do, False (reason DiskHasRoom) otherwise.
inline constexpr const char* kCheckpointDiskFull = "CheckpointDiskFull";
Condition checkpointDiskCondition(const kube::Json& summary);

// Where each node of a job's checkpoint volume copies its closed files: the `copies` nodes after
// it in name order, around a ring (fewer when the job has fewer other nodes), so that each node
// holds the copies of as many others and a new node moves few copies.
std::map<std::string, std::vector<std::string>> checkpointPeersOf(std::set<std::string> nodes,
                                                                  int copies);

// The volumeAttributes.checkpointPeers of a new worker's checkpoint volume: the nodes
// status.checkpoints says hold the job's checkpoints, the newest's first, that `addresses` knows
// (a cache node's host:port), as "node=host:port,..."; "" when none.
std::string checkpointPeersAttribute(const kube::Json& summary,
                                     const std::map<std::string, std::string>& addresses);

// The nodes the job's status.checkpoints said hold its checkpoints (items' nodes) that are lost:
// not among `live` (the nodes whose Node is Ready with a cache node on it). Their peers upload
// the copies they hold of their files.
std::vector<std::string> lostCheckpointNodes(const kube::Json& summary,
                                             const std::set<std::string>& live);

}  // namespace granary::op
