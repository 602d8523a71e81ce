// XXH3-64 with the widest vector unit the CPU offers: the system's libxxhash is built for the
// x86-64 baseline (SSE2), about half the speed of AVX2 on the 64 KiB blocks chunks are checked in
// (ChunkStore::blockChecksum, on every chunk written, read and received) and on the checkpoint
// files that cross between nodes. The values are XXH3_64bits's, whichever unit computes them.
// Thread-safety: xxh3() may be called from any thread; an Xxh3Stream is used by one at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace granary {

uint64_t xxh3(const void* data, size_t size);

// The XXH3-64 of bytes given piece by piece: xxh3() of them all.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;

  void add(std::string_view bytes);
  uint64_t digest() const;

 private:
  void* state_;  // an XXH3_state_t
};

}  // namespace granary
