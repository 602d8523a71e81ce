#include "common/kube/label_selector.h"

#include <gtest/gtest.h>

namespace granary::kube {
namespace {

bool matches(std::string_view selector, const std::map<std::string, std::string>& labels) {
  auto parsed = LabelSelector::parse(selector);
  EXPECT_TRUE(parsed.isOk()) << parsed.status();
  return parsed.isOk() && parsed->matches(labels);
}

TEST(LabelSelector, EveryOperator) {
  const std::map<std::string, std::string> labels{
      {"app", "web"}, {"tier", "front"}, {"gpu", "a100"}};
  EXPECT_TRUE(matches("", labels));
  EXPECT_TRUE(matches("app=web", labels));
  EXPECT_TRUE(matches("app==web", labels));
  EXPECT_FALSE(matches("app=db", labels));
  EXPECT_TRUE(matches("app!=db", labels));
  EXPECT_TRUE(matches("missing!=x", labels));
  EXPECT_TRUE(matches("gpu in (h100, a100)", labels));
  EXPECT_FALSE(matches("gpu notin (h100,a100)", labels));
  EXPECT_TRUE(matches("tier", labels));
  EXPECT_FALSE(matches("!tier", labels));
  EXPECT_TRUE(matches("!canary", labels));
  EXPECT_TRUE(matches("app=web, tier in (front,back), !canary", labels));
  EXPECT_FALSE(matches("app=web,tier=back", labels));
  EXPECT_TRUE(matches("granary.io/job-name!=x", labels));
}

TEST(LabelSelector, RejectsMalformedSelectors) {
  for (const char* bad : {"app=web,,x", "gpu in a100", "gpu in (a", "=web", "a b"}) {
    auto parsed = LabelSelector::parse(bad);
    EXPECT_FALSE(parsed.isOk()) << bad;
  }
  EXPECT_NE(LabelSelector::parse("gpu in a100").status().message().find("key in (a,b)"),
            std::string::npos);
}

TEST(FieldSelector, EqualityOnly) {
  auto s = LabelSelector::parseFields("spec.nodeName=n1,status.phase!=Failed");
  ASSERT_TRUE(s.isOk()) << s.status();
  EXPECT_TRUE(s->matches({{"spec.nodeName", "n1"}, {"status.phase", "Running"}}));
  EXPECT_FALSE(s->matches({{"spec.nodeName", "n1"}, {"status.phase", "Failed"}}));
  EXPECT_FALSE(LabelSelector::parseFields("spec.nodeName").isOk());
  EXPECT_FALSE(LabelSelector::parseFields("a in (b)").isOk());
}

}  // namespace
}  // namespace granary::kube
