// Node filters, as kube-scheduler applies them: each returns why a pod cannot go to a node,
// in kube-scheduler's words, or "" when it can. Pure.
#pragma once

#include <string>

#include "common/cluster/model.h"

namespace granary::cluster {

// Ready and schedulable.
std::string checkNodeCondition(const NodeInfo& node);
// Every NoSchedule and NoExecute taint tolerated (PreferNoSchedule never blocks).
std::string checkTaints(const NodeInfo& node, const PodInfo& pod);
bool tolerates(const api::Toleration& toleration, const Taint& taint);
// nodeSelector and required node affinity (In, NotIn, Exists, DoesNotExist, Gt, Lt; matchFields
// on metadata.name).
std::string checkAffinity(const NodeInfo& node, const PodInfo& pod);
bool matchesTerm(const api::NodeSelectorTerm& term, const NodeInfo& node);
// Requests against allocatable minus what is already requested (plus `extra`, e.g. gang
// members already placed on the node in this attempt).
std::string checkResources(const NodeInfo& node, const PodInfo& pod, const Resources& extra = {});

// All of the above but resources, which depend on what else lands on the node.
std::string checkStatic(const NodeInfo& node, const PodInfo& pod);

}  // namespace granary::cluster
