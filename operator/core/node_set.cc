#include "operator/core/node_set.h"

#include <algorithm>

#include "common/cluster/node_checks.h"
#include "common/quantity.h"

namespace granary::op {

namespace {

// The dataset's placement rules, in the shape the scheduler's filters read.
cluster::PodInfo rulesOf(const api::CacheSpec& spec) {
  cluster::PodInfo rules;
  rules.nodeSelector = spec.nodeSelector;
  if (spec.nodeAffinity) rules.requiredTerms = spec.nodeAffinity->required;
  rules.tolerations = spec.tolerations;
  return rules;
}

// Why `candidate` may not hold the dataset; "" when it may.
std::string whyNot(const api::CacheSpec& spec, const cluster::PodInfo& rules,
                   const CacheNode& candidate) {
  std::string why = cluster::checkStatic(candidate.node, rules);
  if (why.empty() && !candidate.agentReady) why = "granary-cache-node is not ready";
  if (why.empty() && spec.capacityPerNode && candidate.capacityBytes &&
      *candidate.capacityBytes < spec.capacityPerNode->bytes) {
    why = "cache capacity " + formatByteSize({*candidate.capacityBytes}) + " < capacityPerNode " +
          formatByteSize(*spec.capacityPerNode);
  }
  return why;
}

bool healthy(const CacheNode& candidate) {
  return candidate.node.ready && !candidate.node.unschedulable && candidate.agentReady;
}

}  // namespace

NodeSetPlan planNodeSet(const api::CacheSpec& spec, const std::vector<CacheNode>& candidates,
                        const std::set<std::string>& listed) {
  const cluster::PodInfo rules = rulesOf(spec);
  NodeSetPlan plan;
  for (const auto& candidate : candidates) {
    if (whyNot(spec, rules, candidate).empty())
      plan.nodes.push_back(candidate);
    else if (listed.count(candidate.node.name) && healthy(candidate))
      plan.departed.push_back(candidate);
  }
  if (plan.nodes.empty())
    for (const auto& candidate : candidates)
      plan.excluded[candidate.node.name] = whyNot(spec, rules, candidate);
  std::sort(plan.nodes.begin(), plan.nodes.end(),
            [](const CacheNode& a, const CacheNode& b) { return a.node.name < b.node.name; });
  return plan;
}

}  // namespace granary::op
