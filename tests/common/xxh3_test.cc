#include "common/xxh3.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <random>
#include <vector>

namespace granary {
namespace {

// Whichever vector unit computes it, xxh3() is the library's XXH3-64: chunks checksummed by one
// node are checked by another, and by this one after an upgrade.
TEST(Xxh3Test, EqualsTheLibrarysHashAtEverySizeAndAlignment) {
  std::mt19937_64 random(7);
  std::vector<char> bytes((1 << 17) + 64);
  for (auto& byte : bytes) byte = static_cast<char>(random());
  for (const size_t size :
       {0, 1, 3, 16, 17, 128, 129, 240, 241, 1024, 4096, 65535, 65536, 65537, 100'000, 1 << 17}) {
    for (const size_t offset : {0, 1, 7, 32}) {
      EXPECT_EQ(xxh3(bytes.data() + offset, size), XXH3_64bits(bytes.data() + offset, size))
          << size << " bytes at offset " << offset;
    }
  }
}

TEST(Xxh3Test, AStreamGivesTheHashOfAllItsPieces) {
  std::mt19937_64 random(9);
  std::vector<char> bytes(300'000);
  for (auto& byte : bytes) byte = static_cast<char>(random());
  Xxh3Stream stream;
  EXPECT_EQ(stream.digest(), XXH3_64bits(nullptr, 0));
  for (size_t at = 0, piece = 1; at < bytes.size(); at += piece, piece = piece * 3 + 7)
    stream.add(std::string_view(bytes.data() + at, std::min(piece, bytes.size() - at)));
  EXPECT_EQ(stream.digest(), XXH3_64bits(bytes.data(), bytes.size()));
}

TEST(Xxh3Test, ADifferentByteGivesADifferentHash) {
  std::vector<char> bytes(65536, 'x');
  const uint64_t before = xxh3(bytes.data(), bytes.size());
  bytes[40'000] ^= 1;
  EXPECT_NE(xxh3(bytes.data(), bytes.size()), before);
}

}  // namespace
}  // namespace granary
