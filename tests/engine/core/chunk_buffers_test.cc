#include "engine/core/chunk_buffers.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace granary::cache {
namespace {

constexpr size_t kChunk = 4 << 20;

TEST(ChunkBuffers, ABufferComesBackAfterItsLastOwnerWithItsBytesUntouched) {
  ChunkBuffers buffers(2);
  std::string bytes = buffers.take(kChunk);
  ASSERT_EQ(bytes.size(), kChunk);
  bytes.assign(kChunk, 'x');
  const char* memory = bytes.data();
  auto shared = buffers.share(std::move(bytes));
  auto reader = shared;
  shared.reset();
  EXPECT_EQ(buffers.waiting(), 0u);  // a reader still has it
  reader.reset();
  ASSERT_EQ(buffers.waiting(), 1u);
  const std::string again = buffers.take(kChunk);
  EXPECT_EQ(again.data(), memory);                         // the same memory
  EXPECT_EQ(again, std::string(kChunk, 'x'));              // nothing zeroed
  EXPECT_EQ(buffers.take(kChunk / 2).size(), kChunk / 2);  // none waits: a new one
}

TEST(ChunkBuffers, KeepsAtMostItsCountAndNoSmallBuffers) {
  ChunkBuffers buffers(2);
  std::vector<std::shared_ptr<const std::string>> shared;
  for (int i = 0; i < 4; ++i) shared.push_back(buffers.share(std::string(kChunk, 'z')));
  shared.clear();
  EXPECT_EQ(buffers.waiting(), 2u);
  buffers.share(std::string(ChunkBuffers::kMinBytes / 2, 'y'));
  EXPECT_EQ(buffers.waiting(), 2u);
}

TEST(ChunkBuffers, TakesOneOfTheSizeAskedForFirst) {
  ChunkBuffers buffers(3);
  auto large = buffers.share(std::string(2 * kChunk, 'l'));
  auto exact = buffers.share(std::string(kChunk, 'e'));
  const char* exactMemory = exact->data();
  large.reset();
  exact.reset();
  EXPECT_EQ(buffers.take(kChunk).data(), exactMemory);
}

TEST(ChunkBuffers, ASharedBufferMayOutliveThePool) {
  std::shared_ptr<const std::string> kept;
  {
    ChunkBuffers buffers(1);
    kept = buffers.share(std::string(kChunk, 'k'));
  }
  EXPECT_EQ(kept->size(), kChunk);
  kept.reset();  // given back to a shelf no pool uses any more, and freed with it
}

}  // namespace
}  // namespace granary::cache
