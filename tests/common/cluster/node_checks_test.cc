#include "common/cluster/node_checks.h"

#include <gtest/gtest.h>

#include "tests/common/cluster/fixtures.h"

namespace granary::cluster {
namespace {

using testing::gpuNode;
using testing::worker;

api::Toleration toleration(std::string key, std::string op, std::string value, std::string effect) {
  return {std::move(key), std::move(op), std::move(value), std::move(effect), std::nullopt};
}

TEST(NodeChecks, NodeConditions) {
  NodeInfo node = gpuNode("n1");
  EXPECT_EQ(checkNodeCondition(node), "");
  node.ready = false;
  EXPECT_EQ(checkNodeCondition(node), "node(s) were not ready");
  node.ready = true;
  node.unschedulable = true;
  EXPECT_EQ(checkNodeCondition(node), "node(s) were unschedulable");
}

TEST(NodeChecks, TaintsAndTolerations) {
  const Taint gpu{"nvidia.com/gpu", "present", "NoSchedule"};
  struct Case {
    const char* name;
    api::Toleration toleration;
    bool tolerated;
  } cases[] = {
      {"equal key value effect", toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule"),
       true},
      {"equal wrong value", toleration("nvidia.com/gpu", "Equal", "absent", "NoSchedule"), false},
      {"exists any value", toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"), true},
      {"exists any effect", toleration("nvidia.com/gpu", "Exists", "", ""), true},
      {"wrong effect", toleration("nvidia.com/gpu", "Exists", "", "NoExecute"), false},
      {"empty key exists tolerates all", toleration("", "Exists", "", ""), true},
      {"other key", toleration("dedicated", "Exists", "", ""), false},
  };
  for (const auto& c : cases) EXPECT_EQ(tolerates(c.toleration, gpu), c.tolerated) << c.name;

  NodeInfo node = gpuNode("n1");
  node.taints = {gpu, {"spot", "", "PreferNoSchedule"}};
  PodInfo pod = worker("ml/w0");
  EXPECT_EQ(checkTaints(node, pod), "node(s) had untolerated taint {nvidia.com/gpu: present}");
  pod.tolerations = {toleration("nvidia.com/gpu", "Exists", "", "")};
  EXPECT_EQ(checkTaints(node, pod), "") << "PreferNoSchedule never blocks";
  node.taints.push_back({"maintenance", "", "NoExecute"});
  EXPECT_EQ(checkTaints(node, pod), "node(s) had untolerated taint {maintenance}");
}

TEST(NodeChecks, NodeSelectorAndEveryAffinityOperator) {
  NodeInfo node = gpuNode("gpu-7");
  node.labels = {{"gpu", "h100"}, {"zone", "a"}, {"cores", "96"}};
  PodInfo pod = worker("ml/w0");
  pod.nodeSelector = {{"gpu", "h100"}};
  EXPECT_EQ(checkAffinity(node, pod), "");
  pod.nodeSelector = {{"gpu", "a100"}};
  EXPECT_EQ(checkAffinity(node, pod), "node(s) didn't match Pod's node affinity/selector");
  pod.nodeSelector.clear();

  struct Case {
    api::NodeSelectorRequirement requirement;
    bool matches;
  } cases[] = {
      {{"gpu", "In", {"a100", "h100"}}, true}, {{"gpu", "In", {"a100"}}, false},
      {{"gpu", "NotIn", {"a100"}}, true},      {{"gpu", "NotIn", {"h100"}}, false},
      {{"missing", "NotIn", {"x"}}, true},     {{"zone", "Exists", {}}, true},
      {{"missing", "Exists", {}}, false},      {{"missing", "DoesNotExist", {}}, true},
      {{"zone", "DoesNotExist", {}}, false},   {{"cores", "Gt", {"64"}}, true},
      {{"cores", "Gt", {"96"}}, false},        {{"cores", "Lt", {"128"}}, true},
      {{"zone", "Lt", {"5"}}, false},  // not a number
  };
  for (const auto& c : cases) {
    api::NodeSelectorTerm term;
    term.matchExpressions = {c.requirement};
    EXPECT_EQ(matchesTerm(term, node), c.matches) << c.requirement.key << " " << c.requirement.op;
  }
  api::NodeSelectorTerm byName;
  byName.matchFields = {{"metadata.name", "In", {"gpu-7"}}};
  EXPECT_TRUE(matchesTerm(byName, node));
  EXPECT_FALSE(matchesTerm(api::NodeSelectorTerm{}, node)) << "an empty term matches nothing";

  // Terms are ORed; expressions within a term are ANDed.
  api::NodeSelectorTerm wrong, right;
  wrong.matchExpressions = {{"gpu", "In", {"a100"}}};
  right.matchExpressions = {{"gpu", "In", {"h100"}}, {"zone", "In", {"a"}}};
  pod.requiredTerms = {wrong};
  EXPECT_NE(checkAffinity(node, pod), "");
  pod.requiredTerms = {wrong, right};
  EXPECT_EQ(checkAffinity(node, pod), "");
}

TEST(NodeChecks, ResourcesCountWhatIsAlreadyRequested) {
  NodeInfo node = gpuNode("n1", 8);
  node.requested = testing::resources(8000, 64, 4, 1);
  EXPECT_EQ(checkResources(node, worker("ml/w", 4)), "");
  EXPECT_EQ(checkResources(node, worker("ml/w", 8)), "Insufficient nvidia.com/gpu");
  Resources extra;
  extra.extended["nvidia.com/gpu"] = 2;
  EXPECT_EQ(checkResources(node, worker("ml/w", 4), extra), "Insufficient nvidia.com/gpu");
  PodInfo hungry = worker("ml/w", 0);
  hungry.requests.milliCpu = 60000;
  EXPECT_EQ(checkResources(node, hungry), "Insufficient cpu");
}

}  // namespace
}  // namespace granary::cluster
