#include "common/quantity.h"

#include <gtest/gtest.h>

namespace granary {
namespace {

using namespace std::chrono_literals;

TEST(ByteSize, ParsesPlainAndSuffixedQuantities) {
  EXPECT_EQ(parseByteSize("0")->bytes, 0);
  EXPECT_EQ(parseByteSize("1073741824")->bytes, 1073741824);
  EXPECT_EQ(parseByteSize("500Mi")->bytes, 500LL << 20);
  EXPECT_EQ(parseByteSize("1.5Gi")->bytes, 3LL << 29);
  EXPECT_EQ(parseByteSize("2Ti")->bytes, 2LL << 40);
  EXPECT_EQ(parseByteSize("100M")->bytes, 100'000'000);
  EXPECT_EQ(parseByteSize("4k")->bytes, 4000);
  EXPECT_EQ(parseByteSize("2e9")->bytes, 2'000'000'000);
  EXPECT_EQ(parseByteSize("7Ei")->bytes, 7LL << 60);
}

TEST(ByteSize, RejectsMalformedNegativeFractionalAndHuge) {
  for (const char* text : {"", "Gi", "-1", "1.5", "10 Gi", "10gb", "1e", "0x10", "9Ei", "1e40"}) {
    auto size = parseByteSize(text);
    EXPECT_FALSE(size.isOk()) << text;
    EXPECT_EQ(size.status().code(), StatusCode::kInvalidArgument) << text;
  }
  EXPECT_NE(parseByteSize("lots").status().message().find("such as 500Mi"), std::string::npos);
}

TEST(ByteSize, FormatsWithBinarySuffix) {
  EXPECT_EQ(formatByteSize({512}), "512");
  EXPECT_EQ(formatByteSize({1024}), "1Ki");
  EXPECT_EQ(formatByteSize({3LL << 29}), "1.5Gi");
  EXPECT_EQ(formatByteSize({10LL << 40}), "10Ti");
}

TEST(ByteSize, FormatThenParseRoundTripsWholeUnits) {
  for (int64_t bytes : {int64_t{1} << 10, int64_t{5} << 30, int64_t{3} << 40, int64_t{999}}) {
    EXPECT_EQ(parseByteSize(formatByteSize({bytes}))->bytes, bytes);
  }
}

TEST(Duration, ParsesGoStyleDurations) {
  EXPECT_EQ(*parseDuration("0"), 0ns);
  EXPECT_EQ(*parseDuration("250ms"), 250ms);
  EXPECT_EQ(*parseDuration("30s"), 30s);
  EXPECT_EQ(*parseDuration("5m"), 5min);
  EXPECT_EQ(*parseDuration("1h30m"), 90min);
  EXPECT_EQ(*parseDuration("1.5h"), 90min);
  EXPECT_EQ(*parseDuration("10us"), 10us);
  EXPECT_EQ(*parseDuration("7ns"), 7ns);
}

TEST(Duration, RejectsMissingUnitsAndGarbage) {
  for (const char* text : {"", "30", "s", "-5s", "5 s", "5d", "1h-3m"}) {
    EXPECT_FALSE(parseDuration(text).isOk()) << text;
  }
}

}  // namespace
}  // namespace granary
