// CPU time on a clock of clock_gettime (a process's, a thread's), for the benchmarks that print
// what their subject spent.
#pragma once

#include <time.h>

#include <chrono>

namespace granary::bench {

// The time on `clock` (CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID, a clock_getcpuclockid
// one); -1 ns when it cannot be read.
inline std::chrono::nanoseconds cpuTime(clockid_t clock) {
  timespec t{};
  if (::clock_gettime(clock, &t) != 0) return std::chrono::nanoseconds{-1};
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

}  // namespace granary::bench
