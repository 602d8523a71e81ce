#include "engine/core/placement.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace granary::cache {
namespace {

std::vector<std::string> nodes(int count, const std::string& prefix = "gpu-") {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(prefix + std::to_string(i));
  return out;
}

std::string path(int i) {
  return "train/shard-" + std::to_string(i / 1000) + "/img-" + std::to_string(i) + ".jpg";
}

TEST(Placement, OwnersAreDistinctDeterministicAndIndependentOfOrder) {
  auto set = nodes(8);
  const auto owners = ownersOf("train/a.jpg", set, 3);
  ASSERT_EQ(owners.size(), 3u);
  EXPECT_EQ(std::set<std::string>(owners.begin(), owners.end()).size(), 3u);
  EXPECT_EQ(ownersOf("train/a.jpg", set, 3), owners);
  std::reverse(set.begin(), set.end());
  EXPECT_EQ(ownersOf("train/a.jpg", set, 3), owners) << "every node computes the same owners";
  EXPECT_EQ(ownersOf("train/a.jpg", set, 20).size(), 8u) << "no more owners than nodes";
  EXPECT_TRUE(ownersOf("train/a.jpg", set, 0).empty());
  EXPECT_TRUE(ownersOf("train/a.jpg", {}, 2).empty());
}

TEST(Placement, OwnsAgreesWithOwnersOf) {
  const auto set = nodes(6);
  for (int i = 0; i < 2000; ++i) {
    const auto owners = ownersOf(path(i), set, 2);
    for (const auto& node : set) {
      const bool listed = std::find(owners.begin(), owners.end(), node) != owners.end();
      ASSERT_EQ(owns(node, path(i), set, 2), listed) << node << " " << path(i);
    }
  }
  EXPECT_FALSE(owns("stranger", path(1), set, 2));
}

TEST(Placement, BalancesWithinAFewPercent) {
  const auto set = nodes(8);
  constexpr int kFiles = 100000;
  for (int replicas : {1, 2}) {
    std::map<std::string, int> counts;
    for (int i = 0; i < kFiles; ++i) {
      for (const auto& owner : ownersOf(path(i), set, replicas)) ++counts[owner];
    }
    const double expected = static_cast<double>(kFiles) * replicas / 8;
    for (const auto& [node, count] : counts) {
      EXPECT_NEAR(count / expected, 1.0, 0.03) << node << " with replicas " << replicas;
    }
  }
}

TEST(Placement, AJoiningNodeTakesOnlyItsShare) {
  auto before = nodes(8);
  auto after = before;
  after.push_back("gpu-new");
  constexpr int kFiles = 50000;
  int moved = 0;
  for (int i = 0; i < kFiles; ++i) {
    const auto was = ownersOf(path(i), before, 1)[0];
    const auto now = ownersOf(path(i), after, 1)[0];
    if (was != now) {
      ++moved;
      ASSERT_EQ(now, "gpu-new") << "files only move to the new node";
    }
  }
  EXPECT_NEAR(static_cast<double>(moved) / kFiles, 1.0 / 9, 0.01);
}

TEST(Placement, ALeavingNodeGivesUpOnlyItsFiles) {
  const auto before = nodes(8);
  std::vector<std::string> after(before.begin(), before.end() - 1);  // gpu-7 leaves
  for (int i = 0; i < 20000; ++i) {
    const auto was = ownersOf(path(i), before, 2);
    const auto now = ownersOf(path(i), after, 2);
    const bool hadLeaver = std::find(was.begin(), was.end(), "gpu-7") != was.end();
    if (!hadLeaver) {
      ASSERT_EQ(now, was) << "untouched files keep their owners";
    } else {
      // The surviving owner stays; one new owner replaces the leaver.
      for (const auto& owner : was) {
        if (owner != "gpu-7") {
          ASSERT_NE(std::find(now.begin(), now.end(), owner), now.end());
        }
      }
    }
  }
}

TEST(Placement, WeightsSeparateNodeFromPath) {
  EXPECT_NE(rendezvousWeight("ab", "c"), rendezvousWeight("a", "bc"));
  EXPECT_EQ(rendezvousWeight("gpu-1", "x"), rendezvousWeight("gpu-1", "x"));
}

}  // namespace
}  // namespace granary::cache
