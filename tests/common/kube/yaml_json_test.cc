#include "common/kube/yaml_json.h"

#include <gtest/gtest.h>

namespace granary::kube {
namespace {

TEST(YamlJson, ResolvesScalarsLikeTheCoreSchema) {
  auto node = config::parse(R"(
a: 1
b: -2
c: 1.5
d: true
e: "true"
f: null
g: ~
h: hello
i: "007"
j: [1, "x", {k: false}]
l: 1e3
)",
                            "t.yaml");
  ASSERT_TRUE(node.isOk());
  const Json json = toJson(*node);
  EXPECT_EQ(json, Json::parse(R"({"a":1,"b":-2,"c":1.5,"d":true,"e":"true","f":null,"g":null,
    "h":"hello","i":"007","j":[1,"x",{"k":false}],"l":1000.0})"));
  EXPECT_TRUE(json.at("a").is_integer());
}

// An object from the API server decodes as the same document in a file would: strings stay
// strings even when they look like numbers, and errors name the field path.
TEST(ToConfig, KeepsTypesAndFieldPaths) {
  const Json json = Json::parse(
      R"({"spec":{"replicas":2,"ratio":0.5,"warm":true,"tag":"007","none":null,"list":[{"k":"v"}]}})");
  const config::Node node = toConfig(json);
  EXPECT_EQ(toJson(node), json) << "round trip";
  const config::Node* spec = node.find("spec");
  ASSERT_NE(spec, nullptr);
  int32_t replicas = 0;
  EXPECT_TRUE(config::decodeValue(*spec->find("replicas"), replicas).isOk());
  EXPECT_EQ(replicas, 2);
  int64_t tag = 0;
  const Status notANumber = config::decodeValue(*spec->find("tag"), tag);
  EXPECT_FALSE(notANumber.isOk()) << "\"007\" is a string";
  EXPECT_NE(notANumber.message().find("spec.tag"), std::string::npos) << notANumber;
  EXPECT_TRUE(spec->find("none")->isNull());
  EXPECT_EQ(spec->find("list")->items()[0].find("k")->path(), "spec.list[0].k");
}

}  // namespace
}  // namespace granary::kube
