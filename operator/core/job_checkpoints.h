// What a TrainingJob's status says of its checkpoints (spec.checkpoints), from the checkpoint
// volume each of its workers' nodes reports (GetTelemetry). Pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/kube/object.h"
#include "common/origin_roots.h"
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

// ---- Whose a checkpoint uri is ----

// The job's CheckpointUriRefused condition for spec.checkpoints.uri `uri` of namespace `ns`,
// given the cache nodes' checkpointOriginRoots (common/origin_roots.h's checkUnderRoots, as the
// nodes check it before resolving symlinks): True naming spec.checkpoints.uri, the namespace and
// the setting to change (reason InOtherNamespacesDirectory, OutsideCheckpointRoots or
// NoCheckpointRoots), False (WithinCheckpointRoots) for a file:// uri they accept; nullopt for
// other uris (s3://: confined by the credentials of the job's own namespace).
inline constexpr const char* kCheckpointUriRefused = "CheckpointUriRefused";
std::optional<Condition> checkpointUriCondition(const std::string& uri, const std::string& ns,
                                                const std::vector<OriginRoot>& roots);

// A TrainingJob of a namespace with spec.checkpoints, as the check of shared uris sees it.
struct CheckpointsUser {
  std::string name;
  std::string uri;
  std::chrono::system_clock::time_point created{};
  bool active = false;  // neither finished (Succeeded, Failed) nor being deleted
};
// The job whose checkpoints `job` would overwrite (and that would overwrite its): among `others`
// (jobs of the same namespace), the first created (then by name) that is active and names the same
// uri, when it was created before `job`; nullopt when there is none or `job` is not active, or is
// the first itself.
std::optional<std::string> checkpointsSharedWith(const CheckpointsUser& job,
                                                 const std::vector<CheckpointsUser>& others);
// The job's CheckpointUriShared condition: True (reason UriOfAnotherJob) naming
// spec.checkpoints.uri, the other job and the fix, or False (OwnUri).
inline constexpr const char* kCheckpointUriShared = "CheckpointUriShared";
Condition checkpointSharedCondition(const std::string& uri,
                                    const std::optional<std::string>& sharedWith);

}  // namespace granary::op
