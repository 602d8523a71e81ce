#include "common/xxh3.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <new>

namespace granary {
namespace {

XXH3_state_t* stateOf(void* state) { return static_cast<XXH3_state_t*>(state); }

}  // namespace

#if defined(__x86_64__)
// common/xxh3_avx2.cc, built for AVX2.
uint64_t xxh3Avx2(const void* data, size_t size);
void xxh3Avx2Add(void* state, const void* data, size_t size);

namespace {
bool hasAvx2() {
  static const bool avx2 = [] {
    __builtin_cpu_init();  // in case this runs before the constructors that would
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return avx2;
}
}  // namespace

uint64_t xxh3(const void* data, size_t size) {
  return hasAvx2() ? xxh3Avx2(data, size) : XXH3_64bits(data, size);
}

void Xxh3Stream::add(std::string_view bytes) {
  if (hasAvx2()) return xxh3Avx2Add(state_, bytes.data(), bytes.size());
  XXH3_64bits_update(stateOf(state_), bytes.data(), bytes.size());
}
#else
uint64_t xxh3(const void* data, size_t size) { return XXH3_64bits(data, size); }

void Xxh3Stream::add(std::string_view bytes) {
  XXH3_64bits_update(stateOf(state_), bytes.data(), bytes.size());
}
#endif

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(stateOf(state_));
}

Xxh3Stream::~Xxh3Stream() { XXH3_freeState(stateOf(state_)); }

uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(stateOf(state_)); }

}  // namespace granary
