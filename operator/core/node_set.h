// Which cache nodes hold a dataset: every cache node whose Kubernetes node the Dataset's
// nodeSelector, nodeAffinity and tolerations admit, that is ready and has room for
// capacityPerNode. Rendezvous hashing on the nodes spreads the files (and `replicas` copies of
// each) over the set, so a node joining or leaving moves only its own share. Pure.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/api/dataset.h"
#include "common/cluster/model.h"

namespace granary::op {

// A granary-cache-node agent and the node it runs on.
struct CacheNode {
  cluster::NodeInfo node;                // labels, taints, readiness of the Kubernetes node
  std::string address;                   // host:port of its CacheNode API
  bool agentReady = true;                // the agent's pod is Ready
  std::optional<int64_t> capacityBytes;  // cache space it advertises; unset: unknown
};

struct NodeSetPlan {
  std::vector<CacheNode> nodes;  // chosen, by node name
  // Node name → why not; kept only when no node is chosen (the status then says why).
  std::map<std::string, std::string> excluded;
  // The nodes named in `listed` (those the dataset's status lists) that are healthy (node
  // Ready and schedulable, agent Ready) yet excluded: the dataset's own rules or its capacity
  // keep them out, so nothing of it belongs there. A node out only for its health is not one:
  // it may come back with its cache.
  std::vector<CacheNode> departed;
};

// One pass over the candidates; copies only the nodes chosen or departed.
NodeSetPlan planNodeSet(const api::CacheSpec& spec, const std::vector<CacheNode>& candidates,
                        const std::set<std::string>& listed = {});

}  // namespace granary::op
