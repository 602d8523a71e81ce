// Built with -mavx2 (common/CMakeLists.txt): called only where the CPU has AVX2 (common/xxh3.cc).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace granary {

uint64_t xxh3Avx2(const void* data, size_t size);  // declared for common/xxh3.cc

uint64_t xxh3Avx2(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace granary
