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

}  // namespace
}  // namespace granary::kube
