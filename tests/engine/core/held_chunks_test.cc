#include "engine/core/held_chunks.h"

#include <gtest/gtest.h>

namespace granary::cache {
namespace {

struct Chunk {
  std::shared_ptr<const std::string> bytes;
};

Chunk chunkOf(size_t size, char fill) { return {std::make_shared<const std::string>(size, fill)}; }

TEST(HeldChunks, KeepsTheMostRecentlyUsedWithinItsBytes) {
  HeldChunks<Chunk> held(300);
  held.hold("a", chunkOf(100, 'a'));
  held.hold("b", chunkOf(100, 'b'));
  held.hold("c", chunkOf(100, 'c'));
  EXPECT_EQ(held.usedBytes(), 300);
  ASSERT_TRUE(held.find("a"));  // now the most recent: b goes first
  held.hold("d", chunkOf(100, 'd'));
  EXPECT_FALSE(held.find("b"));
  EXPECT_EQ(held.find("a")->bytes->front(), 'a');
  EXPECT_TRUE(held.find("c"));
  EXPECT_TRUE(held.find("d"));
  EXPECT_EQ(held.usedBytes(), 300);
}

TEST(HeldChunks, AChunkLargerThanTheBoundIsNeverHeldAndZeroHoldsNone) {
  HeldChunks<Chunk> held(150);
  held.hold("a", chunkOf(100, 'a'));
  held.hold("big", chunkOf(151, 'x'));
  EXPECT_FALSE(held.find("big"));
  EXPECT_TRUE(held.find("a"));
  HeldChunks<Chunk> none(0);
  none.hold("a", chunkOf(1, 'a'));
  EXPECT_FALSE(none.find("a"));
  EXPECT_EQ(none.usedBytes(), 0);
}

TEST(HeldChunks, AHeldChunkOutlivesItsPlaceForWhoeverStillReadsIt) {
  HeldChunks<Chunk> held(100);
  held.hold("a", chunkOf(100, 'a'));
  const auto reading = held.find("a");
  held.hold("a", chunkOf(50, 'z'));  // replaced
  held.drop("b");                    // not held: nothing happens
  EXPECT_EQ(reading->bytes->size(), 100u);
  EXPECT_EQ(held.find("a")->bytes->front(), 'z');
  EXPECT_EQ(held.usedBytes(), 50);
  held.drop("a");
  EXPECT_EQ(held.usedBytes(), 0);
}

}  // namespace
}  // namespace granary::cache
