// A Dataset that refers to another: when it is served, what its status says, and the cache
// generation that a change of spec.sharing alone leaves as it was.
#include "operator/core/dataset_reference.h"

#include <gtest/gtest.h>

#include "operator/core/cache_generation.h"
#include "operator/core/conditions.h"
#include "tests/support/cluster.h"

namespace granary::op {
namespace {

using kube::Json;

const auto kNow = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));

Json source(const std::string& sharing, const std::string& uri = "s3://corp/imagenet/") {
  return testing::yaml(
      "metadata: {name: imagenet, namespace: datasets, generation: 4}\n"
      "spec: {source: {uri: \"" +
      uri + "\"}, sharing: {namespaces: [" + sharing +
      "]}}\n"
      "status: {phase: Ready, totalBytes: 900, cachedBytes: 900, "
      "originBytesRead: 900, nodes: [{name: gpu-1, cachedBytes: 900}], "
      "conditions: [{type: Ready, status: \"True\", reason: Cached, "
      "message: every node holds its share, lastTransitionTime: "
      "\"2026-11-27T10:00:00Z\"}]}\n");
}

ReferenceObservation observation(const Json* from, Json previous = Json()) {
  return {.ns = "team-b",
          .generation = 2,
          .reference = {"datasets", "imagenet", "train"},
          .source = from,
          .previousStatus = std::move(previous),
          .now = kNow};
}

TEST(DatasetReference, AnOfferedSourceIsServedWithItsStatusOnItsNodes) {
  const Json offered = source("team-a, team-b");
  const ReferencePlan plan = planReference(observation(&offered));
  EXPECT_TRUE(plan.serve);
  EXPECT_EQ(plan.nodes, std::vector<std::string>{"gpu-1"});
  EXPECT_EQ(plan.status.at("phase").as_string(), "Ready");
  EXPECT_EQ(plan.status.at("totalBytes").as_number().to_int64(), 900);
  EXPECT_EQ(plan.status.at("observedGeneration").as_number().to_int64(), 2);
  EXPECT_FALSE(plan.status.has_field("originBytesRead")) << "it reads nothing from the origin";
  const Condition ready = conditionOf(plan.status, "Ready");
  EXPECT_TRUE(ready.status);
  EXPECT_EQ(ready.reason, "Cached");
  EXPECT_EQ(ready.message, "Dataset datasets/imagenet: every node holds its share");
  ASSERT_TRUE(plan.event);
  EXPECT_FALSE(plan.event->warning);
  // The same world again: the same status, and no Event.
  const ReferencePlan again = planReference(observation(&offered, plan.status));
  EXPECT_TRUE(kube::sameJson(again.status, plan.status));
  EXPECT_FALSE(again.event);
}

TEST(DatasetReference, RefusalsNameTheFieldAndTheFixAndListNoNode) {
  const ReferencePlan missing = planReference(observation(nullptr));
  EXPECT_FALSE(missing.serve);
  EXPECT_EQ(missing.status.at("phase").as_string(), "Pending");
  EXPECT_EQ(conditionOf(missing.status, "Ready").reason, kSourceNotFound);

  const Json chained = source("team-b", "dataset://other/imagenet");
  const ReferencePlan chain = planReference(observation(&chained));
  EXPECT_EQ(chain.status.at("phase").as_string(), "Failed");
  EXPECT_EQ(conditionOf(chain.status, "Ready").reason, kSourceIsReference);
  EXPECT_NE(conditionOf(chain.status, "Ready").message.find("dataset://other/imagenet"),
            std::string::npos);

  const Json closed = source("team-a");
  const ReferencePlan refused = planReference(observation(&closed));
  const Condition notOffered = conditionOf(refused.status, "Ready");
  EXPECT_EQ(notOffered.reason, kNotOffered);
  EXPECT_EQ(notOffered.message,
            "spec.source.uri: Dataset datasets/imagenet is not offered to namespace \"team-b\"; "
            "its owner lists \"team-b\" in spec.sharing.namespaces");
  ASSERT_TRUE(refused.event);
  EXPECT_TRUE(refused.event->warning);

  // Served before, then no longer offered: withdrawn, without the source's figures.
  const Json offered = source("team-b");
  const ReferencePlan served = planReference(observation(&offered));
  const ReferencePlan withdrawn = planReference(observation(&closed, served.status));
  EXPECT_FALSE(withdrawn.serve);
  EXPECT_EQ(conditionOf(withdrawn.status, "Ready").reason, kOfferWithdrawn);
  EXPECT_FALSE(withdrawn.status.has_field("nodes"));
  EXPECT_FALSE(withdrawn.status.has_field("totalBytes"));
  EXPECT_EQ(
      conditionOf(planReference(observation(&closed, withdrawn.status)).status, "Ready").reason,
      kOfferWithdrawn)
      << "it stays withdrawn, not merely not offered";
  // Offered again: served again.
  EXPECT_TRUE(planReference(observation(&offered, withdrawn.status)).serve);
}

TEST(DatasetReference, TheSourceListsOnlyReferrersOfNamespacesItOffersTo) {
  const Json offered = source("team-b");
  const auto referrer = [](const std::string& ns) {
    return std::make_shared<const Json>(
        testing::yaml("metadata: {name: imagenet, namespace: " + ns + "}\n"));
  };
  EXPECT_EQ(referrersOffered(offered, {referrer("team-c"), referrer("team-b")}),
            std::vector<std::string>{"team-b/imagenet"});
  EXPECT_EQ(sourceKeyOf(source("", "dataset://datasets/imagenet/val")), "datasets/imagenet");
  EXPECT_EQ(sourceKeyOf(offered), "");
}

TEST(CacheGeneration, ChangingOnlySharingKeepsTheCacheAndAnyOtherChangeIsANewOne) {
  Json dataset = source("team-b");
  const CacheGeneration first = cacheGenerationOf(dataset);
  EXPECT_EQ(first.generation, 4) << "no record yet: the object's generation";
  dataset["status"] = withCacheGeneration(dataset.at("status"), first);

  dataset["metadata"]["generation"] = Json::number(5);
  dataset["spec"]["sharing"]["namespaces"] = Json::array();
  EXPECT_EQ(cacheGenerationOf(dataset).generation, 4);

  dataset["metadata"]["generation"] = Json::number(6);
  dataset["spec"]["cache"] = testing::yaml("{warm: Never}");
  EXPECT_EQ(cacheGenerationOf(dataset).generation, 6);
}

}  // namespace
}  // namespace granary::op
