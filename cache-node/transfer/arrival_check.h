// Checks a chunk's bytes as they arrive against the checksums its sender's store recorded when it
// wrote the chunk (ChunkStore::blockChecksum per kChecksumBlock bytes): end to end, from the disk
// that holds it to the memory that receives it, with no hashing on the sending side. Each block is
// checked as soon as it is whole, while its bytes are still in the cache. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/store/chunk_store.h"

namespace granary::cache::transfer {

class ArrivalCheck {
 public:
  // Whether `checksums` can describe `length` bytes (one per block).
  static bool fits(std::span<const uint32_t> checksums, int64_t length) {
    if (length < 0) return false;
    const int64_t blocks =
        length / ChunkStore::kChecksumBlock + (length % ChunkStore::kChecksumBlock != 0 ? 1 : 0);
    return static_cast<int64_t>(checksums.size()) == blocks;
  }

  // `checksums` must fit `length` (fits()).
  ArrivalCheck(std::vector<uint32_t> checksums, int64_t length)
      : checksums_(std::move(checksums)), length_(length) {}

  // Checks every block that the first `arrived` bytes of `chunk` complete and no earlier call
  // checked. False once a block failed (it stays false).
  bool advance(const char* chunk, int64_t arrived) {
    while (good_ && checked_ < length_) {
      const int64_t end = std::min(checked_ + ChunkStore::kChecksumBlock, length_);
      if (end > arrived) break;
      const auto block = static_cast<size_t>(checked_ / ChunkStore::kChecksumBlock);
      good_ = ChunkStore::blockChecksum(chunk + checked_, end - checked_) == checksums_[block];
      checked_ = end;
    }
    return good_;
  }

  // Every byte arrived and matched.
  bool complete() const { return good_ && checked_ == length_; }

 private:
  std::vector<uint32_t> checksums_;
  int64_t length_;
  int64_t checked_ = 0;
  bool good_ = true;
};

}  // namespace granary::cache::transfer
