#include "engine/core/manifest_changes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace granary::cache {
namespace {

TEST(ManifestOrderTest, KeepsADirectorysChildrenTogether) {
  std::vector<std::string> paths = {"a/d", "a/b/c", "a-1/x", "a/b0/x", "b", "a/b/c/d"};
  std::sort(paths.begin(), paths.end(),
            [](const auto& x, const auto& y) { return manifestOrder(x, y) < 0; });
  EXPECT_EQ(paths, (std::vector<std::string>{"b", "a/d", "a-1/x", "a/b/c", "a/b/c/d", "a/b0/x"}));
  EXPECT_EQ(manifestOrder("a/b", "a/b"), std::strong_ordering::equal);
}

TEST(CountChangeTest, TellsFilesApartBySizeAndVersion) {
  ManifestChanges changes;
  const ListedFile a{"a", 10, "e1"}, aResized{"a", 11, "e1"}, aRewritten{"a", 10, "e2"};
  countChange(changes, &a, &a);
  countChange(changes, &a, &aResized);
  countChange(changes, &a, &aRewritten);
  countChange(changes, nullptr, &aResized);
  countChange(changes, &a, nullptr);
  EXPECT_EQ(changes, (ManifestChanges{.added = 1,
                                      .changed = 2,
                                      .removed = 1,
                                      .unchanged = 1,
                                      .addedBytes = 11,
                                      .changedBytes = 21}));
  EXPECT_TRUE(changes.any());
  EXPECT_FALSE(ManifestChanges{.unchanged = 3}.any());
}

}  // namespace
}  // namespace granary::cache
