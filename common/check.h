// GRANARY_CHECK(cond, message): for states that a correct program never reaches (a bug,
// not bad input). Prints the location and message, then aborts. Bad input and failures
// of the outside world are reported through Status instead.
#pragma once

#include <cstdio>
#include <cstdlib>

#define GRANARY_CHECK(cond, message)                                                              \
  do {                                                                                            \
    if (!(cond)) [[unlikely]] {                                                                   \
      std::fprintf(stderr, "granary: check failed at %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, \
                   static_cast<const char*>(message));                                            \
      std::abort();                                                                               \
    }                                                                                             \
  } while (false)
