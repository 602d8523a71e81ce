#include "operator/object_views.h"

#include <gtest/gtest.h>

#include "common/cluster/kube_model.h"
#include "common/kube/store.h"
#include "operator/cache_node_discovery.h"
#include "operator/core/readers.h"

namespace granary::op {
namespace {

using kube::Json;

kube::ObjectPtr shared(Json object) { return std::make_shared<const Json>(std::move(object)); }

// A worker pod as the API server returns it: what the operator reads, and much it does not.
const char* kWorker = R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "train-worker-1", "namespace": "ml", "uid": "u-1", "resourceVersion": "7",
    "creationTimestamp": "2026-11-27T10:00:00Z",
    "labels": {"granary.io/job-name": "train", "granary.io/rank": "1", "granary.io/attempt": "2"},
    "annotations": {"granary.io/access-order-files": "{\"coco\": \"/order/coco.txt\"}"},
    "managedFields": [{"manager": "granary-operator", "fieldsV1": {"f:spec": {}}}],
    "ownerReferences": [{"kind": "TrainingJob", "name": "train", "uid": "j-1"}]},
  "spec": {"nodeName": "gpu-3", "schedulerName": "granary-scheduler",
    "containers": [{"name": "trainer", "image": "pytorch",
      "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
      "command": ["torchrun", "--nproc-per-node=8", "train.py"]}],
    "volumes": [{"name": "data", "csi": {"driver": "csi.granary.io",
      "volumeAttributes": {"dataset": "coco"}}}, {"name": "tmp", "emptyDir": {}}]},
  "status": {"phase": "Running", "hostIP": "10.0.0.3", "podIP": "10.1.0.9",
    "conditions": [{"type": "Ready", "status": "True"}],
    "containerStatuses": [{"name": "trainer", "state": {"running": {}}, "image": "pytorch"}]}})";

TEST(ObjectViews, AWorkerPodsViewReadsAsThePod) {
  const Json pod = Json::parse(kWorker);
  const Json view = workerPodView(pod);
  EXPECT_EQ(datasetsMountedBy(view), std::vector<std::string>{"coco"});
  const auto readers = readersOf({shared(view)}, "coco");
  ASSERT_EQ(readers.size(), 1u);
  EXPECT_EQ(readers, readersOf({shared(pod)}, "coco"));
  EXPECT_EQ(readers[0].accessOrderFile, "/order/coco.txt");
  for (const char* kept : {"status.conditions", "status.containerStatuses",
                           "metadata.creationTimestamp", "metadata.labels"})
    EXPECT_TRUE(kube::sameJson(kube::pathValue(view, kept), kube::pathValue(pod, kept))) << kept;
  EXPECT_TRUE(kube::pathValue(view, "spec.containers").is_null());
  EXPECT_TRUE(kube::pathValue(view, "metadata.managedFields").is_null());
  EXPECT_LT(view.serialize().size(), pod.serialize().size() * 3 / 4);
}

TEST(ObjectViews, NodesAndAgentsViewsFindTheSameCacheNodes) {
  const Json node = Json::parse(R"({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "gpu-3", "uid": "n-3", "resourceVersion": "9",
      "labels": {"pool": "a100"}, "annotations": {"volumes.kubernetes.io/controller": "x"}},
    "spec": {"unschedulable": true, "podCIDR": "10.1.0.0/24",
      "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
    "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": "8"},
      "conditions": [{"type": "Ready", "status": "True"}],
      "images": [{"names": ["pytorch:latest"], "sizeBytes": 9000000000}]}})");
  const Json agent = Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "cache-node-x", "namespace": "granary", "uid": "a-1",
      "resourceVersion": "4", "labels": {"app.kubernetes.io/name": "granary-cache-node"},
      "annotations": {"granary.io/cache-capacity": "800Gi"}},
    "spec": {"nodeName": "gpu-3", "containers": [{"name": "agent", "image": "granary",
      "ports": [{"name": "grpc", "containerPort": 7411}]}]},
    "status": {"podIP": "10.1.0.2", "hostIP": "10.0.0.3",
      "conditions": [{"type": "Ready", "status": "True"}]}})");
  const auto discovered = [](const Json& agentPod, const Json& nodeObject) {
    kube::Store nodes;
    nodes.upsert(shared(nodeObject));
    return discoverCacheNodes({shared(agentPod)}, nodes);
  };
  const auto whole = discovered(agent, node);
  const auto viewed = discovered(agentPodView(agent), nodeView(node));
  ASSERT_EQ(whole.size(), 1u);
  ASSERT_EQ(viewed.size(), 1u);
  const CacheNode& a = whole[0];
  const CacheNode& b = viewed[0];
  EXPECT_EQ(b.address, "10.1.0.2:7411");
  EXPECT_EQ(b.address, a.address);
  EXPECT_EQ(b.agentReady, a.agentReady);
  EXPECT_EQ(b.capacityBytes, a.capacityBytes);
  EXPECT_EQ(b.node.name, a.node.name);
  EXPECT_EQ(b.node.labels, a.node.labels);
  EXPECT_EQ(b.node.allocatable, a.node.allocatable);
  EXPECT_TRUE(b.node.ready && b.node.unschedulable);
  ASSERT_EQ(b.node.taints.size(), 1u);
  EXPECT_EQ(b.node.taints[0].key, "gpu");
  EXPECT_EQ(b.node.taints[0].effect, "NoSchedule");
  EXPECT_TRUE(kube::pathValue(nodeView(node), "status.images").is_null());
}

// A DaemonSet's surge rollout runs the replacing pod beside the old one on the same node for a
// moment: the node is one cache node, served by the ready pod, and by the newer while both are.
TEST(ObjectViews, TwoCacheNodePodsOnOneNodeAreOneCacheNode) {
  const auto pod = [](const std::string& name, const std::string& ip, const std::string& created,
                      bool ready) {
    return shared(agentPodView(Json::parse(R"({"metadata": {"name": ")" + name +
                                           R"(", "creationTimestamp": ")" + created +
                                           R"("}, "spec": {"nodeName": "gpu-1"}, "status": {
      "podIP": ")" + ip + R"(", "conditions": [{"type": "Ready", "status": ")" +
                                           (ready ? "True" : "False") + R"("}]}})")));
  };
  kube::Store nodes;
  const auto old = pod("old", "10.1.0.2", "2026-11-01T10:00:00Z", true);
  const auto surge = pod("new", "10.1.0.9", "2026-11-28T10:00:00Z", false);
  const auto ready = pod("new", "10.1.0.9", "2026-11-28T10:00:00Z", true);
  const auto released = pod("old", "10.1.0.2", "2026-11-01T10:00:00Z", false);
  for (const auto& pods : {std::vector{old, surge}, std::vector{surge, old}}) {
    const auto found = discoverCacheNodes(pods, nodes);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].address, "10.1.0.2:7400") << "the ready one, while the new one starts";
  }
  for (const auto& pods :
       {std::vector{old, ready}, std::vector{released, ready}, std::vector{ready, released}}) {
    const auto found = discoverCacheNodes(pods, nodes);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].address, "10.1.0.9:7400") << "the newer once it is ready";
    EXPECT_TRUE(found[0].agentReady);
  }
}

TEST(ObjectViews, DatasetsAndJobsLoseOnlyTheirManagedFields) {
  const Json job = Json::parse(R"({"apiVersion": "granary.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "train", "finalizers": ["f"], "managedFields": [{"manager": "kubectl"}]},
    "spec": {"template": {"spec": {"containers": [{"name": "t"}]}}}, "status": {"phase": "Running"}})");
  Json expected = job;
  expected["metadata"].erase("managedFields");
  EXPECT_TRUE(kube::sameJson(withoutManagedFields(job), expected));
  EXPECT_TRUE(kube::sameJson(
      serviceView(Json::parse(R"({"metadata": {"name": "s"}, "spec": {"clusterIP": "None"}})")),
      Json::parse(R"({"metadata": {"name": "s"}})")));
}

}  // namespace
}  // namespace granary::op
