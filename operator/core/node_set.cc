#include "operator/core/node_set.h"

#include <algorithm>

#include "common/cluster/node_checks.h"
#include "common/quantity.h"

namespace granary::op {

NodeSetPlan planNodeSet(const api::CacheSpec& spec, const std::vector<CacheNode>& candidates) {
  // The dataset's placement rules, in the shape the scheduler's filters read.
  cluster::PodInfo rules;
  rules.nodeSelector = spec.nodeSelector;
  if (spec.nodeAffinity) rules.requiredTerms = spec.nodeAffinity->required;
  rules.tolerations = spec.tolerations;
  NodeSetPlan plan;
  for (const auto& candidate : candidates) {
    std::string why = cluster::checkStatic(candidate.node, rules);
    if (why.empty() && !candidate.agentReady) why = "granary-cache-node is not ready";
    if (why.empty() && spec.capacityPerNode && candidate.capacityBytes &&
        *candidate.capacityBytes < spec.capacityPerNode->bytes) {
      why = "cache capacity " + formatByteSize({*candidate.capacityBytes}) + " < capacityPerNode " +
            formatByteSize(*spec.capacityPerNode);
    }
    if (why.empty()) {
      plan.nodes.push_back(candidate);
    } else {
      plan.excluded[candidate.node.name] = why;
      if (candidate.node.ready && !candidate.node.unschedulable && candidate.agentReady)
        plan.unfit.push_back(candidate);
    }
  }
  std::sort(plan.nodes.begin(), plan.nodes.end(),
            [](const CacheNode& a, const CacheNode& b) { return a.node.name < b.node.name; });
  return plan;
}

}  // namespace granary::op
