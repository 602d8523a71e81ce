// The data plane's wire format and the check of arriving bytes, without sockets.
#include "cache-node/transfer/frame.h"

#include <gtest/gtest.h>

#include <random>

#include "cache-node/transfer/arrival_check.h"

namespace granary::cache::transfer {
namespace {

std::string_view bodyOf(const std::string& frame) { return std::string_view(frame).substr(4); }

TEST(TransferFrame, RequestsAndRepliesComeBackAsTheyWereSent) {
  const ChunkRequest request{.ns = "ml",
                             .name = "coco",
                             .uid = "u-1",
                             .generation = 3,
                             .path = "train/a b.bin",
                             .index = 7,
                             .etag = "\"e\"",
                             .fill = true,
                             .length = 16 << 20};
  const std::string frame = encodeRequest(request);
  ASSERT_EQ(decodeFrameLength(std::string_view(frame).substr(0, 4)).valueOr(0), frame.size() - 4);
  const auto decoded = decodeRequest(bodyOf(frame));
  ASSERT_TRUE(decoded.isOk()) << decoded.status();
  EXPECT_EQ(decoded->path, "train/a b.bin");
  EXPECT_EQ(decoded->generation, 3);
  EXPECT_EQ(decoded->index, 7);
  EXPECT_EQ(decoded->etag, "\"e\"");
  EXPECT_TRUE(decoded->fill);
  EXPECT_EQ(decoded->length, 16 << 20);

  const auto ok = decodeReply(bodyOf(encodeReply({.length = 70'000, .checksums = {1, 2}})));
  ASSERT_TRUE(ok.isOk()) << ok.status();
  EXPECT_EQ(ok->length, 70'000);
  EXPECT_EQ(ok->checksums, (std::vector<uint32_t>{1, 2}));
  const auto refused = decodeReply(bodyOf(encodeReply({.status = notFound("no such chunk")})));
  ASSERT_TRUE(refused.isOk());
  EXPECT_EQ(refused->status.code(), StatusCode::kNotFound);
  EXPECT_EQ(refused->status.message(), "no such chunk");

  const auto hello = decodeHello(bodyOf(encodeHello({.token = "t", .node = "gpu-1"})));
  ASSERT_TRUE(hello.isOk());
  EXPECT_EQ(hello->version, kVersion);
  EXPECT_EQ(hello->node, "gpu-1");
}

TEST(TransferFrame, BadFramesAreRefusedNotTrusted) {
  const std::string request = encodeRequest({.path = "a"});
  // Cut short, one byte too many, another kind.
  EXPECT_EQ(decodeRequest(bodyOf(request).substr(0, bodyOf(request).size() - 1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(decodeRequest(std::string(bodyOf(request)) + "x").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(decodeHello(bodyOf(request)).status().code(), StatusCode::kInvalidArgument);
  // A length past the bound, zero, or a string longer than the frame.
  const uint32_t huge = kMaxFrame + 1, zero = 0;
  EXPECT_FALSE(decodeFrameLength(std::string_view(reinterpret_cast<const char*>(&huge), 4)).isOk());
  EXPECT_FALSE(decodeFrameLength(std::string_view(reinterpret_cast<const char*>(&zero), 4)).isOk());
  std::string lying(bodyOf(encodeHello({.token = "abc"})));
  lying[5] = '\x7f';  // the token's length
  EXPECT_FALSE(decodeHello(lying).isOk());
  // Checksums that cannot describe the length.
  EXPECT_FALSE(ArrivalCheck::fits(std::vector<uint32_t>{1}, ChunkStore::kChecksumBlock + 1));
  EXPECT_TRUE(ArrivalCheck::fits(std::vector<uint32_t>{1, 2}, ChunkStore::kChecksumBlock + 1));
}

TEST(ArrivalCheck, ChecksEachBlockAsItCompletesAndStopsAtTheFirstBadOne) {
  std::string chunk(3 * ChunkStore::kChecksumBlock + 100, '\0');
  std::mt19937 random(3);
  for (auto& c : chunk) c = static_cast<char>(random());
  const std::vector<uint32_t> checksums = ChunkStore::blockChecksums(chunk);
  ArrivalCheck good(checksums, static_cast<int64_t>(chunk.size()));
  for (int64_t arrived = 1000; arrived < static_cast<int64_t>(chunk.size()); arrived += 50'000)
    ASSERT_TRUE(good.advance(chunk.data(), arrived));
  EXPECT_FALSE(good.complete());
  EXPECT_TRUE(good.advance(chunk.data(), static_cast<int64_t>(chunk.size())));
  EXPECT_TRUE(good.complete());

  std::string flipped = chunk;
  flipped[2 * ChunkStore::kChecksumBlock + 5] ^= 1;
  ArrivalCheck bad(checksums, static_cast<int64_t>(flipped.size()));
  EXPECT_TRUE(bad.advance(flipped.data(), 2 * ChunkStore::kChecksumBlock));
  EXPECT_FALSE(bad.advance(flipped.data(), 3 * ChunkStore::kChecksumBlock));
  EXPECT_FALSE(bad.advance(flipped.data(), static_cast<int64_t>(flipped.size())));
  EXPECT_FALSE(bad.complete());
}

}  // namespace
}  // namespace granary::cache::transfer
