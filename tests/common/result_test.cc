#include "common/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace granary {
namespace {

Result<int> half(int n) {
  if (n % 2) return invalidArgument(std::to_string(n) + " is odd");
  return n / 2;
}

Result<int> quarter(int n) {
  GRANARY_ASSIGN_OR_RETURN(int h, half(n));
  GRANARY_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(Result, HoldsValue) {
  Result<int> r = half(8);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(*r, 4);
  EXPECT_TRUE(r.status().isOk());
}

TEST(Result, HoldsError) {
  Result<int> r = half(7);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "7 is odd");
  EXPECT_EQ(r.valueOr(-1), -1);
}

TEST(Result, AssignOrReturnChains) {
  EXPECT_EQ(*quarter(8), 2);
  EXPECT_EQ(quarter(6).status().message(), "3 is odd");
  EXPECT_EQ(quarter(5).status().message(), "5 is odd");
}

TEST(Result, OkStatusWithoutValueBecomesInternalError) {
  Result<int> r = Status::ok();
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(Result, MoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.isOk());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 5);
}

TEST(Result, ConvertingConstruction) {
  Result<std::string> r = "text";
  EXPECT_EQ(*r, "text");
  EXPECT_EQ(r->size(), 4u);
}

TEST(ResultDeathTest, ValueOfFailureAborts) {
  Result<int> r = notFound("gone");
  EXPECT_DEATH((void)r.value(), "value\\(\\) of a failed Result: not_found: gone");
}

}  // namespace
}  // namespace granary
