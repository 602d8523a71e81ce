// What the fuzz targets share: a check that fails loudly (libFuzzer saves the input that made it
// fail as a crash), beyond the sanitizers' own checks.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace granary::fuzz {

// Prints what broke and aborts; libFuzzer reports the abort and keeps the input.
[[noreturn]] inline void fail(const char* file, int line, const char* condition,
                              const std::string& detail) {
  std::fprintf(stderr, "%s:%d: invariant broken: %s\n%s\n", file, line, condition, detail.c_str());
  std::abort();
}

}  // namespace granary::fuzz

// GRANARY_FUZZ_CHECK(condition, detail): `detail` (a std::string expression) is evaluated only
// when the condition fails.
#define GRANARY_FUZZ_CHECK(condition, detail) \
  ((condition) ? void() : ::granary::fuzz::fail(__FILE__, __LINE__, #condition, (detail)))
