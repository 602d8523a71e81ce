// XXH3-64 of a buffer with the widest vector unit the CPU offers: the system's libxxhash is built
// for the x86-64 baseline (SSE2), about half the speed of AVX2 on the 64 KiB blocks chunks are
// checked in (ChunkStore::blockChecksum, on every chunk written, read and received). The value is
// XXH3_64bits's, whichever unit computes it.
// Thread-safety: may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace granary {

uint64_t xxh3(const void* data, size_t size);

}  // namespace granary
