#include "engine/core/chunk_buffers.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace granary::cache {
namespace {

constexpr size_t kChunk = 4 << 20;

TEST(ChunkBuffers, ABufferComesBackAfterItsLastOwnerWithItsBytesUntouched) {
  ChunkBuffers buffers(64 << 20);
  std::string bytes = buffers.take(kChunk);
  ASSERT_EQ(bytes.size(), kChunk);
  bytes.assign(kChunk, 'x');
  const char* memory = bytes.data();
  auto shared = buffers.share(std::move(bytes));
  auto reader = shared;
  shared.reset();
  EXPECT_EQ(buffers.waitingBytes(), 0u);  // a reader still has it
  reader.reset();
  EXPECT_GE(buffers.waitingBytes(), kChunk);
  const std::string again = buffers.take(kChunk);
  EXPECT_EQ(again.data(), memory);             // the same memory
  EXPECT_EQ(again, std::string(kChunk, 'x'));  // nothing zeroed
  EXPECT_EQ(buffers.waitingBytes(), 0u);
}

TEST(ChunkBuffers, KeepsAtMostItsBytes) {
  ChunkBuffers buffers(2 * kChunk + kChunk / 2);
  std::vector<std::shared_ptr<const std::string>> shared;
  for (int i = 0; i < 4; ++i) shared.push_back(buffers.share(std::string(kChunk, 'z')));
  shared.clear();
  EXPECT_GE(buffers.waitingBytes(), 2 * kChunk);
  EXPECT_LE(buffers.waitingBytes(), 2 * kChunk + kChunk / 2);
}

// Small buffers that waited since an earlier read make room for the large ones of the read now.
TEST(ChunkBuffers, TheBuffersThatCameBackLongestAgoMakeRoom) {
  ChunkBuffers buffers(2 * kChunk);
  std::vector<std::shared_ptr<const std::string>> small;
  for (int i = 0; i < 20; ++i) small.push_back(buffers.share(std::string(kChunk / 10, 's')));
  small.clear();
  ASSERT_GT(buffers.waitingBytes(), kChunk);  // the small ones fill the shelf
  auto large = buffers.share(std::string(kChunk, 'l'));
  const char* largeMemory = large->data();
  large.reset();
  EXPECT_LE(buffers.waitingBytes(), 2 * kChunk);
  EXPECT_EQ(buffers.take(kChunk).data(), largeMemory);
}

// What holds a chunk counts its size: a small chunk never gets a much larger buffer.
TEST(ChunkBuffers, TakesTheSmallestThatFitsAndNeverOneMuchLarger) {
  ChunkBuffers buffers(64 << 20);
  auto large = buffers.share(std::string(2 * kChunk, 'l'));
  auto fitting = buffers.share(std::string(kChunk + 100, 'f'));
  const char* fittingMemory = fitting->data();
  large.reset();
  fitting.reset();
  const std::string small = buffers.take(kChunk / 2);  // neither: both are too large
  EXPECT_LT(small.capacity(), kChunk);
  const std::string taken = buffers.take(kChunk);
  EXPECT_EQ(taken.data(), fittingMemory);
  EXPECT_EQ(taken.size(), kChunk);
}

TEST(ChunkBuffers, ASharedBufferMayOutliveThePool) {
  std::shared_ptr<const std::string> kept;
  {
    ChunkBuffers buffers(64 << 20);
    kept = buffers.share(std::string(kChunk, 'k'));
  }
  EXPECT_EQ(kept->size(), kChunk);
  kept.reset();  // given back to a shelf no pool uses any more, and freed with it
}

}  // namespace
}  // namespace granary::cache
