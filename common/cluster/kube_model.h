// Reads the placement model from Kubernetes objects (JSON): pods, nodes, Datasets and
// TrainingJobs. Malformed quantities are skipped with the reason returned, never a crash.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cluster/model.h"
#include "common/kube/object.h"

namespace granary::cluster {

// Requests (containers, init containers, overhead), nodeSelector, required node affinity and
// tolerations of a pod. InvalidArgument naming the field for malformed quantities.
Result<PodInfo> podInfoFrom(const kube::Json& pod);
// Labels, taints, allocatable, Ready condition and unschedulable flag of a node.
NodeInfo nodeInfoFrom(const kube::Json& node);
// Bytes of the dataset cached per node, from status.nodes[] and status.totalBytes.
DatasetCache datasetCacheFrom(const kube::Json& dataset);
// The nodes holding a TrainingJob's newest checkpoint whole (status.checkpoints.items[0], as its
// cache nodes report it) as a cache of its own, named "checkpoints:<job>": a restarted gang
// reads it back from their disks rather than from the origin. Nullopt when no node holds one.
std::optional<DatasetCache> checkpointCacheFrom(const kube::Json& job);

// The pod's phase is Succeeded or Failed: its resources are free again.
bool isTerminal(const kube::Json& pod);
// spec.nodeName, "" when unscheduled.
std::string nodeNameOf(const kube::Json& pod);
std::string schedulerNameOf(const kube::Json& pod);

}  // namespace granary::cluster
