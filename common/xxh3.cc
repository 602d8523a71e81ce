#include "common/xxh3.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace granary {

#if defined(__x86_64__)
uint64_t xxh3Avx2(const void* data, size_t size);  // common/xxh3_avx2.cc, built for AVX2

uint64_t xxh3(const void* data, size_t size) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 ? xxh3Avx2(data, size) : XXH3_64bits(data, size);
}
#else
uint64_t xxh3(const void* data, size_t size) { return XXH3_64bits(data, size); }
#endif

}  // namespace granary
