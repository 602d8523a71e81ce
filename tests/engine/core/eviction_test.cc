#include "engine/core/eviction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "engine/core/cached_files.h"

namespace granary::cache {
namespace {

// The contract both policies keep.
class EvictionContract : public ::testing::TestWithParam<bool> {
 protected:
  std::unique_ptr<EvictionPolicy> policy(int64_t capacity) {
    return GetParam() ? makePinPolicy(capacity) : makeLruPolicy(capacity);
  }
};

TEST_P(EvictionContract, NeverExceedsCapacityAndAccountsExactly) {
  auto p = policy(1000);
  std::vector<std::string> evict;
  std::mt19937 random(3);
  std::unordered_map<std::string, int64_t> held;
  for (int i = 0; i < 5000; ++i) {
    const std::string id = "c" + std::to_string(random() % 300);
    const int64_t size = 1 + static_cast<int64_t>(random() % 200);
    if (held.count(id)) {
      p->touch(id);
      continue;
    }
    if (p->admit(id, size, evict)) {
      for (const auto& victim : evict) held.erase(victim);
      held[id] = size;
    }
    int64_t sum = 0;
    for (const auto& [k, v] : held) sum += v;
    ASSERT_EQ(p->usedBytes(), sum);
    ASSERT_LE(p->usedBytes(), p->capacityBytes());
  }
}

TEST_P(EvictionContract, ForgetReleasesRoom) {
  auto p = policy(100);
  std::vector<std::string> evict;
  ASSERT_TRUE(p->admit("a", 100, evict));
  p->forget("a");
  EXPECT_EQ(p->usedBytes(), 0);
  EXPECT_TRUE(p->admit("b", 100, evict));
  EXPECT_TRUE(evict.empty());
  EXPECT_FALSE(p->admit("huge", 101, evict) && p->usedBytes() > 100);
}

INSTANTIATE_TEST_SUITE_P(Policies, EvictionContract, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Pin" : "Lru";
                         });

TEST(PinPolicy, AdmitsUntilFullThenKeepsWhatItHas) {
  auto p = makePinPolicy(300);
  std::vector<std::string> evict;
  EXPECT_TRUE(p->admit("a", 100, evict));
  EXPECT_TRUE(p->admit("b", 200, evict));
  EXPECT_FALSE(p->admit("c", 1, evict));
  EXPECT_TRUE(evict.empty());
  EXPECT_TRUE(p->admit("a", 100, evict)) << "already held";
}

TEST(LruPolicy, EvictsTheLeastRecentlyUsed) {
  auto p = makeLruPolicy(300);
  std::vector<std::string> evict;
  p->admit("a", 100, evict);
  p->admit("b", 100, evict);
  p->admit("c", 100, evict);
  p->touch("a");
  ASSERT_TRUE(p->admit("d", 150, evict));
  EXPECT_EQ(evict, (std::vector<std::string>{"b", "c"}));
}

// When the disk fills before the quota: LRU gives up its oldest chunks, never the one being
// kept, and Pin gives up nothing.
TEST(Eviction, ShrinkingForAFullDisk) {
  auto lru = makeLruPolicy(1000);
  std::vector<std::string> evict;
  for (const char* id : {"a", "b", "c", "d"}) lru->admit(id, 100, evict);
  lru->touch("a");
  EXPECT_EQ(lru->shrink(150, "b"), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(lru->usedBytes(), 200);
  EXPECT_EQ(lru->shrink(1000, "b"), (std::vector<std::string>{"a"}));
  EXPECT_TRUE(lru->shrink(100, "b").empty()) << "only the chunk being kept is left";
  auto pin = makePinPolicy(1000);
  pin->admit("a", 100, evict);
  EXPECT_TRUE(pin->shrink(100, "b").empty());
  EXPECT_EQ(pin->usedBytes(), 100);
}

TEST(CachedFiles, AFileIsCachedWhileEveryChunkIsOnDisk) {
  CachedFiles files;
  files.added("a", 2);
  EXPECT_EQ(files.complete(), 0);
  files.added("a", 2);
  files.added("b", 1);
  EXPECT_EQ(files.complete(), 2);
  files.removed("a");
  EXPECT_EQ(files.complete(), 1);
  files.added("a", 2);
  EXPECT_EQ(files.complete(), 2);
  files.removed("a");
  files.removed("a");
  files.removed("a");  // more than it had: ignored
  files.removed("zzz");
  EXPECT_EQ(files.complete(), 1);
}

// The reason Pin is the default: shuffled epochs over a dataset twice the cache's size.
TEST(Eviction, PinHitsHalfOfShuffledReadsWhereLruThrashes) {
  constexpr int kChunks = 2000;
  std::mt19937 random(11);
  std::vector<int> order(kChunks);
  for (int i = 0; i < kChunks; ++i) order[i] = i;
  const auto hitRatio = [&](EvictionPolicy& policy) {
    int64_t hits = 0, reads = 0;
    std::vector<std::string> evict;
    std::unordered_map<std::string, bool> cached;
    std::mt19937 shuffle(5);
    for (int epoch = 0; epoch < 6; ++epoch) {
      std::shuffle(order.begin(), order.end(), shuffle);
      for (int chunk : order) {
        const std::string id = std::to_string(chunk);
        ++reads;
        if (cached[id]) {
          ++hits;
          policy.touch(id);
        } else if (policy.admit(id, 1, evict)) {
          for (const auto& victim : evict) cached[victim] = false;
          cached[id] = true;
        }
      }
    }
    return static_cast<double>(hits) / static_cast<double>(reads);
  };
  auto pin = makePinPolicy(kChunks / 2);
  auto lru = makeLruPolicy(kChunks / 2);
  const double pinRatio = hitRatio(*pin), lruRatio = hitRatio(*lru);
  // Epoch one is all misses for both: over six epochs Pin reaches 5/6 of 0.5.
  EXPECT_NEAR(pinRatio, 0.5 * 5 / 6, 0.01);
  EXPECT_LT(lruRatio, 0.3);
  EXPECT_GT(pinRatio, lruRatio * 1.5);
}

}  // namespace
}  // namespace granary::cache
