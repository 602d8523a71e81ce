// Built with -mavx2 (common/CMakeLists.txt): called only where the CPU has AVX2 (common/xxh3.cc).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace granary {

// Declared for common/xxh3.cc.
uint64_t xxh3Avx2(const void* data, size_t size);
void xxh3Avx2Add(void* state, const void* data, size_t size);

uint64_t xxh3Avx2(const void* data, size_t size) { return XXH3_64bits(data, size); }

void xxh3Avx2Add(void* state, const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, size);
}

}  // namespace granary
