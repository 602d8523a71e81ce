#include "common/url.h"

#include <gtest/gtest.h>

namespace granary {
namespace {

TEST(Url, EncodesAllButUnreservedAndKept) {
  EXPECT_EQ(percentEncode("train/deep dir/b c.jpg", "/"), "train/deep%20dir/b%20c.jpg");
  EXPECT_EQ(percentEncode("a/b"), "a%2Fb");
  EXPECT_EQ(percentEncode("A-z_0.~"), "A-z_0.~");
}

TEST(Url, DecodesAndKeepsMalformedEscapes) {
  EXPECT_EQ(percentDecode("deep%20dir%2F"), "deep dir/");
  EXPECT_EQ(percentDecode("a+b"), "a+b");
  EXPECT_EQ(percentDecode("a+b", true), "a b");
  EXPECT_EQ(percentDecode("100%zz"), "100%zz");
  EXPECT_EQ(percentDecode("end%2"), "end%2");
  EXPECT_EQ(percentDecode(percentEncode("x y/z?&=", "/")), "x y/z?&=");
}

}  // namespace
}  // namespace granary
