#include "common/kube/object.h"

#include <gtest/gtest.h>

namespace granary::kube {
namespace {

TEST(Projection, KeepsOnlyTheNamedFieldsAndTheObjectsType) {
  const Json pod = Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "w-0", "labels": {"a": "b"}, "managedFields": [{"manager": "x"}]},
    "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
    "status": {"phase": "Running", "hostIP": "10.0.0.1"}})");
  const Json kept = projection(pod, {"metadata.name", "metadata.labels", "spec.nodeName",
                                     "status.phase", "status.podIP", "spec.volumes.x"});
  EXPECT_TRUE(sameJson(kept, Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "w-0", "labels": {"a": "b"}},
    "spec": {"nodeName": "n1"},
    "status": {"phase": "Running"}})")))
      << kept.serialize();
}

TEST(Projection, APathThroughAValueThatIsNotAnObjectKeepsNothingOfIt) {
  const Json object = Json::parse(R"({"spec": {"taints": [1, 2]}, "status": "odd"})");
  const Json kept = projection(object, {"spec.taints", "spec.taints.key", "status.phase"});
  EXPECT_TRUE(sameJson(kept, Json::parse(R"({"spec": {"taints": [1, 2]}})"))) << kept.serialize();
}

}  // namespace
}  // namespace granary::kube
