#include "engine/core/key_range.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace granary::cache {
namespace {

std::vector<std::string> directories(char first, char last) {
  std::vector<std::string> out;
  for (char c = first; c <= last; ++c) out.push_back(std::string(1, c) + "/");
  return out;
}

// How many of `paths` each range holds.
std::vector<int> held(const std::vector<KeyRange>& ranges, const std::vector<std::string>& paths) {
  std::vector<int> counts(ranges.size());
  for (const auto& path : paths)
    for (size_t i = 0; i < ranges.size(); ++i) counts[i] += ranges[i].contains(path) ? 1 : 0;
  return counts;
}

TEST(KeyRangeTest, PartsHoldAboutAsManyDirectoriesEach) {
  const auto ranges = splitAtDirectories(directories('a', 'h'), 4);
  ASSERT_EQ(ranges.size(), 4u);
  std::vector<std::string> paths;
  for (const auto& dir : directories('a', 'h')) paths.push_back(dir + "file");
  EXPECT_EQ(held(ranges, paths), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(ranges.front().after, "");
  EXPECT_EQ(ranges.back().through, "");
}

TEST(KeyRangeTest, NoMorePartsThanDirectories) {
  EXPECT_LE(splitAtDirectories(directories('a', 'c'), 8).size(), 3u);
  EXPECT_EQ(splitAtDirectories(directories('a', 'a'), 8), (std::vector<KeyRange>{{"", ""}}));
  EXPECT_EQ(splitAtDirectories({}, 8), (std::vector<KeyRange>{{"", ""}}));
  EXPECT_EQ(splitAtDirectories(directories('a', 'h'), 1), (std::vector<KeyRange>{{"", ""}}));
}

TEST(KeyRangeTest, EveryPathIsInOnePart) {
  const std::vector<std::string> paths = {"0",     "a",   "a/",    "a/x", "a/y/z", "b",  "b-1",
                                          "b-1/x", "b/x", "b0/x",  "c/",  "c/x",   "cz", "d/x",
                                          "e",     "f/x", "f/y/z", "zz",  "\x7f"};
  const auto ranges = splitAtDirectories({"a/", "b/", "c/", "d/", "f/"}, 3);
  EXPECT_EQ(ranges.size(), 3u);
  for (const auto& path : paths) {
    int holders = 0;
    for (const auto& range : ranges) holders += range.contains(path) ? 1 : 0;
    EXPECT_EQ(holders, 1) << path;
  }
}

TEST(KeyRangeTest, PartsAreDealtOutInRunsToTheListersOfASet) {
  const auto parts = splitAtDirectories(directories('a', 'j'), 10);
  ASSERT_EQ(parts.size(), 10u);
  const auto shares = shareParts(parts, 4);
  ASSERT_EQ(shares.size(), 4u);
  std::vector<KeyRange> joined;
  for (const auto& share : shares) {
    EXPECT_GE(share.size(), 2u);
    EXPECT_LE(share.size(), 3u);
    joined.insert(joined.end(), share.begin(), share.end());
  }
  EXPECT_EQ(joined, parts) << "every part in one share, in key order";
  // Fewer parts than listers: a share each, the other listers none.
  EXPECT_EQ(shareParts(parts, 32).size(), 10u);
  EXPECT_EQ(shareParts({{"", ""}}, 4), (std::vector<std::vector<KeyRange>>{{{"", ""}}}));
}

TEST(KeyRangeTest, AKeyIsInAShareWhenOneOfItsRangesHoldsIt) {
  const std::vector<KeyRange> share = {{"", "b/"}, {"d/", "f/"}};
  for (const char* in : {"a/x", "b-1", "d/x", "e", "f/"}) EXPECT_TRUE(inRanges(share, in)) << in;
  for (const char* out : {"b/x", "c/x", "d/", "f/x", "g"})
    EXPECT_FALSE(inRanges(share, out)) << out;
  EXPECT_FALSE(inRanges({}, "a"));
}

}  // namespace
}  // namespace granary::cache
