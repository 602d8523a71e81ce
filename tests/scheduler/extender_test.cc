// The extender's wire format, field for field, over real HTTP.
#include "scheduler/extender.h"

#include <gtest/gtest.h>

#include "tests/scheduler/core/fixtures.h"
#include "tests/support/http_get.h"

namespace granary::scheduler {
namespace {

using kube::Json;

class ExtenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"n1", "n2", "n3"}) state_.upsertNode(testing::gpuNode(name));
    state_.assume("ml/other", "n3", testing::worker("ml/other", 8).requests);  // n3 is full
  }

  Extender extender(api::Locality locality = api::Locality::kPreferred) {
    return Extender(state_, [locality](const Json&) {
      return PodData{{{"imagenet", 1000, {{"n1", 250}, {"n2", 1000}}}}, locality};
    });
  }

  static Json pod() {
    return Json::parse(
        R"({"metadata":{"name":"w0","namespace":"ml","labels":{"granary.io/job-name":"resnet"}},
      "spec":{"containers":[{"name":"t","resources":{"requests":{"nvidia.com/gpu":"8","cpu":"4"}}}]}})");
  }

  ClusterState state_;
};

TEST_F(ExtenderTest, FilterByNodeNamesAnswersWithNodeNames) {
  Json args = Json::object();
  args["Pod"] = pod();
  args["Nodes"] = Json::null();
  args["NodeNames"] = Json::parse(R"(["n1","n2","n3","n9"])");
  const Json result = extender().filter(args);
  EXPECT_EQ(result.at("NodeNames"), Json::parse(R"(["n1","n2"])"));
  EXPECT_TRUE(result.at("Nodes").is_null());
  EXPECT_EQ(result.at("FailedNodes").at("n3").as_string(), "Insufficient nvidia.com/gpu");
  EXPECT_EQ(result.at("FailedNodes").at("n9").as_string(),
            "node is not in granary-scheduler's cache yet");
  EXPECT_TRUE(result.at("FailedAndUnresolvableNodes").as_object().empty());
  EXPECT_EQ(result.at("Error").as_string(), "");
}

TEST_F(ExtenderTest, FilterByNodeObjectsAnswersWithTheObjects) {
  Json args = Json::object();
  args["Pod"] = pod();
  args["NodeNames"] = Json::null();
  args["Nodes"] = Json::parse(R"({"items":[
    {"metadata":{"name":"n1"},"status":{"allocatable":{"nvidia.com/gpu":"8","cpu":"64","memory":"512Gi","pods":"110"},
     "conditions":[{"type":"Ready","status":"True"}]}},
    {"metadata":{"name":"n4"},"spec":{"taints":[{"key":"dedicated","value":"db","effect":"NoSchedule"}]},
     "status":{"allocatable":{"nvidia.com/gpu":"8","cpu":"64","memory":"512Gi","pods":"110"},
     "conditions":[{"type":"Ready","status":"True"}]}}]})");
  const Json result = extender(api::Locality::kRequired).filter(args);
  ASSERT_TRUE(result.at("Nodes").has_array_field("items"));
  ASSERT_EQ(result.at("Nodes").at("items").size(), 1u);
  EXPECT_EQ(kube::nameOf(result.at("Nodes").at("items").at(0)), "n1");
  EXPECT_TRUE(result.at("NodeNames").is_null());
  EXPECT_EQ(result.at("FailedAndUnresolvableNodes").at("n4").as_string(),
            "node(s) had untolerated taint {dedicated: db}");
}

TEST_F(ExtenderTest, PrioritizeScoresLocalityFromZeroToTen) {
  Json args = Json::object();
  args["Pod"] = pod();
  args["NodeNames"] = Json::parse(R"(["n1","n2","n3"])");
  const Json result = extender().prioritize(args);
  EXPECT_EQ(
      result,
      Json::parse(R"([{"Host":"n1","Score":3},{"Host":"n2","Score":10},{"Host":"n3","Score":0}])"));
}

TEST_F(ExtenderTest, ServesTheVerbsOverHttpUnderAnyPrefix) {
  const Extender e = extender();
  auto server = ExtenderServer::start("127.0.0.1:0", e);
  ASSERT_TRUE(server.isOk()) << server.status();
  const std::string base = "http://127.0.0.1:" + std::to_string((*server)->port()) + "/scheduler";
  Json args = Json::object();
  args["Pod"] = pod();
  args["NodeNames"] = Json::parse(R"(["n2"])");
  std::string body;
  EXPECT_EQ(granary::testing::httpPost(base + "/filter", args.serialize(), body), 200);
  EXPECT_EQ(Json::parse(body).at("NodeNames"), Json::parse(R"(["n2"])"));
  body.clear();
  EXPECT_EQ(granary::testing::httpPost(base + "/prioritize", args.serialize(), body), 200);
  EXPECT_EQ(Json::parse(body), Json::parse(R"([{"Host":"n2","Score":10}])"));
  body.clear();
  EXPECT_EQ(granary::testing::httpPost(base + "/filter", "not json", body), 200);
  EXPECT_EQ(Json::parse(body).at("Error").as_string(), "the request has no Pod");
  body.clear();
  EXPECT_EQ(granary::testing::httpPost(base + "/preempt", "{}", body), 404);
}

}  // namespace
}  // namespace granary::scheduler
