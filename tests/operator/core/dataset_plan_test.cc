// planDataset: the Dataset reconcile's decisions and status from synthetic observations (no
// cluster, no cache node).
#include "operator/core/dataset_plan.h"

#include <gtest/gtest.h>

#include "operator/core/conditions.h"

namespace granary::op {
namespace {

using kube::Json;
using namespace std::chrono_literals;

const DatasetPlanOptions kOptions{.pollWarming = 5s, .pollReady = 30s, .reensureInterval = 600s};

api::Dataset coco(api::WarmPolicy warm = api::WarmPolicy::kOnCreate) {
  api::Dataset d;
  d.metadata = {.name = "coco", .namespace_ = "ml", .uid = "u-1", .generation = 1};
  d.spec.mounts = {api::Mount{.source = {.uri = "http://origin/coco/"}}};
  d.spec.cache.warm = warm;
  return d;
}

CacheNode cacheNode(const std::string& name) {
  CacheNode n;
  n.node.name = name;
  n.address = name + ":7400";
  return n;
}

NodeProgress progress(DatasetPhase phase, int64_t owned, int64_t cached) {
  return {.phase = phase,
          .totalFiles = 10,
          .totalBytes = 1000,
          .ownedFiles = owned / 100,
          .ownedBytes = owned,
          .cachedFiles = cached / 100,
          .cachedBytes = cached,
          .etaSeconds = phase == DatasetPhase::kWarming ? 12 : -1};
}

// A node that holds the current request (ensured a minute ago) and its readers.
NodeAnswer settled(NodeProgress p) {
  return {.status = std::move(p), .ensuredAgo = 60s, .readersAnnounced = true};
}

// Nodes a and b, both answering `pa` and `pb`.
DatasetObservation twoNodes(NodeProgress pa, NodeProgress pb, api::Dataset d = coco()) {
  DatasetObservation o{.generation = 1, .dataset = std::move(d)};
  o.set = planNodeSet(o.dataset->spec.cache, {cacheNode("a"), cacheNode("b")});
  o.answers["a"] = settled(std::move(pa));
  o.answers["b"] = settled(std::move(pb));
  o.now = std::chrono::system_clock::now();
  return o;
}

std::vector<std::string> names(const std::vector<CacheNode>& nodes) {
  std::vector<std::string> out;
  for (const auto& n : nodes) out.push_back(n.node.name);
  return out;
}

std::string phase(const DatasetPlan& plan) { return plan.status.at("phase").as_string(); }
int64_t integer(const DatasetPlan& plan, const char* field) {
  return plan.status.at(field).as_number().to_int64();
}

TEST(DatasetPlan, AnInvalidSpecFailsTerminallyWithTheFieldNamed) {
  DatasetObservation o{.generation = 3,
                       .dataset = invalidArgument("spec.cache.replicas: expected 1 to 16, got 0")};
  const DatasetPlan plan = planDataset(o, kOptions);
  EXPECT_EQ(phase(plan), "Failed");
  const Condition ready = conditionOf(plan.status, "Ready");
  EXPECT_EQ(ready.reason, "InvalidSpec");
  EXPECT_NE(ready.message.find("spec.cache.replicas"), std::string::npos);
  ASSERT_TRUE(plan.terminal);
  EXPECT_EQ(plan.terminal->code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan.requeueAfter, 0ms) << "no retry until the object changes";
  ASSERT_TRUE(plan.event);
  EXPECT_TRUE(plan.event->warning);
  EXPECT_TRUE(plan.ensure.empty());
}

TEST(DatasetPlan, NoCacheNodeIsPendingAndSaysWhy) {
  DatasetObservation o{.generation = 1, .dataset = coco()};
  CacheNode down = cacheNode("a");
  down.agentReady = false;
  o.set = planNodeSet(o.dataset->spec.cache, {down});
  const DatasetPlan plan = planDataset(o, kOptions);
  EXPECT_EQ(phase(plan), "Pending");
  EXPECT_EQ(conditionOf(plan.status, "Ready").reason, "NoCacheNodes");
  EXPECT_NE(conditionOf(plan.status, "Ready").message.find("a: granary-cache-node is not ready"),
            std::string::npos);
  EXPECT_EQ(plan.requeueAfter, 15s);
  EXPECT_FALSE(plan.terminal);
}

TEST(DatasetPlan, NodesThatDoNotHoldItAreEnsuredAndItIsListing) {
  DatasetObservation o{.generation = 1, .dataset = coco(), .hasReaders = false};
  o.set = planNodeSet(o.dataset->spec.cache, {cacheNode("b"), cacheNode("a")});
  // a never heard of it; b holds it but the request changed since (no ensuredAgo).
  o.answers["a"] = {.status = notFound("no such dataset")};
  o.answers["b"] = {.status = progress(DatasetPhase::kReady, 500, 500)};
  const DatasetPlan plan = planDataset(o, kOptions);
  EXPECT_EQ(names(plan.ensure), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(plan.announceReaders.empty()) << "no readers to tell";
  EXPECT_EQ(phase(plan), "Listing");
  EXPECT_EQ(plan.requeueAfter, 5s);
}

TEST(DatasetPlan, AnsweringNodesAreLeftAloneUntilReensureIsDue) {
  DatasetObservation o =
      twoNodes(progress(DatasetPhase::kReady, 600, 600), progress(DatasetPhase::kReady, 400, 400));
  DatasetPlan plan = planDataset(o, kOptions);
  EXPECT_TRUE(plan.ensure.empty());
  EXPECT_TRUE(plan.announceReaders.empty());
  EXPECT_EQ(phase(plan), "Ready");
  EXPECT_EQ(plan.requeueAfter, 30s);
  ASSERT_TRUE(plan.event) << "Pending (none) → Ready";
  EXPECT_FALSE(plan.event->warning);
  EXPECT_EQ(plan.event->reason, "Cached");

  o.previousStatus = plan.status;
  plan = planDataset(o, kOptions);
  EXPECT_EQ(plan.status.serialize(), o.previousStatus.serialize()) << "an unchanged world";
  EXPECT_FALSE(plan.event);

  o.answers["b"].ensuredAgo = 600s;  // credentials may have rotated
  plan = planDataset(o, kOptions);
  EXPECT_EQ(names(plan.ensure), std::vector<std::string>{"b"});
  EXPECT_EQ(phase(plan), "Ready") << "re-ensuring the same request keeps Ready";
}

TEST(DatasetPlan, AnUnreachableNodeIsForgottenAndTheDatasetDegraded) {
  DatasetObservation o =
      twoNodes(progress(DatasetPhase::kReady, 600, 600), progress(DatasetPhase::kReady, 400, 400));
  o.answers["b"].status = unavailable("cache node b:7400: connection refused");
  const DatasetPlan plan = planDataset(o, kOptions);
  EXPECT_EQ(plan.forget, std::vector<std::string>{"b:7400"});
  EXPECT_TRUE(plan.ensure.empty());
  EXPECT_EQ(phase(plan), "Degraded");
  EXPECT_EQ(conditionOf(plan.status, "Ready").reason, "NodeUnreachable");
  ASSERT_TRUE(plan.event);
  EXPECT_TRUE(plan.event->warning);
}

TEST(DatasetPlan, SecretsAreReadOnlyToEnsureAndAMissingOneIsPending) {
  api::Dataset d = coco();
  d.spec.mounts[0].source.secretRef = api::SecretRef{"origin-token"};
  DatasetObservation o = twoNodes(progress(DatasetPhase::kReady, 600, 600),
                                  progress(DatasetPhase::kReady, 400, 400), d);
  EXPECT_FALSE(planDataset(o, kOptions).readCredentials) << "nothing to ensure";

  o.answers["a"].status = notFound("restarted empty");
  EXPECT_TRUE(planDataset(o, kOptions).readCredentials);

  o.credentials = notFound("Secret origin-token (spec.source.secretRef): not found");
  const DatasetPlan plan = planDataset(o, kOptions);
  EXPECT_FALSE(plan.readCredentials);
  EXPECT_TRUE(plan.ensure.empty());
  EXPECT_EQ(phase(plan), "Pending");
  EXPECT_EQ(conditionOf(plan.status, "Ready").reason, "SecretNotFound");
  ASSERT_TRUE(plan.event);
  EXPECT_TRUE(plan.event->warning);
  EXPECT_NE(plan.event->message.find("origin-token"), std::string::npos);

  o.credentials = Status::ok();
  EXPECT_EQ(names(planDataset(o, kOptions).ensure), std::vector<std::string>{"a"});
}

TEST(DatasetPlan, ReadersAreToldToNodesThatLackThemAndAfterEveryEnsure) {
  DatasetObservation o =
      twoNodes(progress(DatasetPhase::kOnDemand, 600, 0), progress(DatasetPhase::kOnDemand, 400, 0),
               coco(api::WarmPolicy::kOnJob));
  o.hasReaders = true;
  o.answers["a"].readersAnnounced = false;
  o.answers["b"].ensuredAgo.reset();  // b is ensured again, which clears its readers
  const DatasetPlan plan = planDataset(o, kOptions);
  EXPECT_EQ(names(plan.ensure), std::vector<std::string>{"b"});
  EXPECT_EQ(names(plan.announceReaders), (std::vector<std::string>{"a", "b"}));
}

TEST(DatasetPlan, NodesTheDatasetLeftArePurgedButNotNodesThatAreOnlyDown) {
  api::Dataset d = coco();
  d.spec.cache.nodeSelector = {{"gpu", "h100"}};
  DatasetObservation o{.generation = 2, .dataset = d};
  CacheNode a = cacheNode("a"), b = cacheNode("b"), c = cacheNode("c");
  a.node.labels = {{"gpu", "h100"}};
  c.node.ready = false;  // down, excluded for its health: it keeps its cache
  o.previousStatus = Json::parse(
      R"({"observedGeneration": 1, "nodes": [{"name": "a"}, {"name": "b"}, {"name": "c"}]})");
  o.set = planNodeSet(o.dataset->spec.cache, {a, b, c}, nodesListedIn(o.previousStatus));
  o.answers["a"] = settled(progress(DatasetPhase::kReady, 1000, 1000));
  const DatasetPlan plan = planDataset(o, kOptions);
  EXPECT_EQ(names(plan.purge), std::vector<std::string>{"b"});
  EXPECT_EQ(phase(plan), "Ready");
}

// Status derivation: the phase is what the nodes really are, the figures what they hold.

TEST(DatasetPlan, WarmNeverIsOnDemandWithWhatIsCachedAndTheFix) {
  const DatasetPlan plan = planDataset(
      twoNodes(progress(DatasetPhase::kOnDemand, 600, 0), progress(DatasetPhase::kOnDemand, 400, 0),
               coco(api::WarmPolicy::kNever)),
      kOptions);
  EXPECT_EQ(phase(plan), "OnDemand");
  EXPECT_EQ(integer(plan, "cachedBytes"), 0);
  EXPECT_EQ(integer(plan, "cachedFiles"), 0);
  EXPECT_EQ(plan.status.at("cachedPercentage").as_string(), "0.0%");
  const Condition ready = conditionOf(plan.status, "Ready");
  EXPECT_FALSE(ready.status);
  EXPECT_EQ(ready.reason, "NotWarmedByPolicy");
  EXPECT_NE(ready.message.find("spec.cache.warm is Never"), std::string::npos) << ready.message;
  EXPECT_NE(ready.message.find("warm: OnCreate"), std::string::npos) << ready.message;
  EXPECT_FALSE(plan.status.at("warm").has_field("etaSeconds")) << "it never finishes";
  EXPECT_EQ(plan.requeueAfter, 30s) << "settled: polled as Ready is";
  ASSERT_TRUE(plan.event);
  EXPECT_FALSE(plan.event->warning) << "a policy's choice, not a fault";
}

TEST(DatasetPlan, OnJobBeforeAJobIsOnDemandAndSaysAJobWarmsIt) {
  const DatasetPlan plan = planDataset(
      twoNodes(progress(DatasetPhase::kOnDemand, 600, 100),
               progress(DatasetPhase::kOnDemand, 400, 0), coco(api::WarmPolicy::kOnJob)),
      kOptions);
  EXPECT_EQ(phase(plan), "OnDemand");
  EXPECT_EQ(integer(plan, "cachedBytes"), 100);
  EXPECT_EQ(plan.status.at("cachedPercentage").as_string(), "10.0%");
  EXPECT_NE(conditionOf(plan.status, "Ready").message.find("OnJob"), std::string::npos);
}

TEST(DatasetPlan, AFullPinQuotaIsQuotaFullNamingTheQuotaAndTheFixes) {
  api::Dataset d = coco();
  d.spec.cache.capacityPerNode = ByteSize{300};
  const DatasetPlan plan = planDataset(twoNodes(progress(DatasetPhase::kQuotaFull, 600, 300),
                                                progress(DatasetPhase::kWarming, 400, 200), d),
                                       kOptions);
  EXPECT_EQ(phase(plan), "QuotaFull") << "what needs a setting changed shows before warming";
  EXPECT_EQ(integer(plan, "cachedBytes"), 500);
  EXPECT_EQ(plan.status.at("cachedPercentage").as_string(), "50.0%");
  const Condition ready = conditionOf(plan.status, "Ready");
  EXPECT_EQ(ready.reason, "CacheQuotaFull");
  EXPECT_NE(ready.message.find("spec.cache.capacityPerNode (300"), std::string::npos)
      << ready.message;
  EXPECT_NE(ready.message.find("policy: LRU"), std::string::npos) << ready.message;
  EXPECT_NE(ready.message.find(" on a "), std::string::npos) << "names the node: " << ready.message;
  ASSERT_TRUE(plan.event);
  EXPECT_TRUE(plan.event->warning);
  EXPECT_EQ(plan.requeueAfter, 30s);
}

TEST(DatasetPlan, ReadyOnlyWhenEveryNodeIsReady) {
  DatasetPlan plan = planDataset(twoNodes(progress(DatasetPhase::kReady, 600, 600),
                                          progress(DatasetPhase::kOnDemand, 400, 100)),
                                 kOptions);
  EXPECT_EQ(phase(plan), "OnDemand");
  EXPECT_EQ(integer(plan, "cachedBytes"), 700);
  EXPECT_EQ(plan.status.at("cachedPercentage").as_string(), "70.0%");

  plan = planDataset(twoNodes(progress(DatasetPhase::kReady, 600, 600),
                              progress(DatasetPhase::kWarming, 400, 100)),
                     kOptions);
  EXPECT_EQ(phase(plan), "Warming");
  EXPECT_EQ(plan.status.at("warm").at("etaSeconds").as_integer(), 12);
  EXPECT_EQ(plan.requeueAfter, 5s);
}

TEST(DatasetPlan, FailedAndDegradedComeBeforeQuotaFull) {
  NodeProgress failed = progress(DatasetPhase::kFailed, 400, 0);
  failed.message = "origin: 403 Forbidden";
  DatasetPlan plan =
      planDataset(twoNodes(progress(DatasetPhase::kQuotaFull, 600, 300), failed), kOptions);
  EXPECT_EQ(phase(plan), "Failed");
  EXPECT_NE(conditionOf(plan.status, "Ready").message.find("403"), std::string::npos);
  plan = planDataset(twoNodes(progress(DatasetPhase::kQuotaFull, 600, 300),
                              progress(DatasetPhase::kDegraded, 400, 0)),
                     kOptions);
  EXPECT_EQ(phase(plan), "Degraded");
}

// A node whose origin cannot be listed yet says what it awaits: the Dataset is Pending with
// that reason (a Warning), polled again, never terminal; once the node lists, it is Listing.
TEST(DatasetPlan, ANodeAwaitingItsOriginLeavesTheDatasetPendingWithWhatIsAwaited) {
  NodeProgress awaiting = progress(DatasetPhase::kPending, 0, 0);
  awaiting.message =
      "waiting for the origin: file:// source /mnt/nfs/coco does not exist on this node (yet)";
  DatasetPlan plan =
      planDataset(twoNodes(progress(DatasetPhase::kListing, 0, 0), awaiting), kOptions);
  EXPECT_EQ(phase(plan), "Pending");
  const Condition ready = conditionOf(plan.status, "Ready");
  EXPECT_EQ(ready.reason, "OriginUnavailable");
  EXPECT_EQ(ready.message, "b: " + awaiting.message);
  EXPECT_FALSE(plan.terminal);
  EXPECT_GT(plan.requeueAfter, 0ms);
  ASSERT_TRUE(plan.event);
  EXPECT_TRUE(plan.event->warning);

  plan = planDataset(
      twoNodes(progress(DatasetPhase::kListing, 0, 0), progress(DatasetPhase::kPending, 0, 0)),
      kOptions);
  EXPECT_EQ(phase(plan), "Listing");
  DatasetObservation fresh = twoNodes(progress(DatasetPhase::kListing, 0, 0), awaiting);
  fresh.answers["b"] = {.status = notFound("not on this node")};  // ensured next, not awaiting
  EXPECT_EQ(phase(planDataset(fresh, kOptions)), "Listing");
}

}  // namespace
}  // namespace granary::op
