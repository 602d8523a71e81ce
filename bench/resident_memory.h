// A process's resident memory as /proc/PID/status gives it, for the benchmarks that print it.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

namespace granary::bench {

struct ResidentMemory {
  int64_t current = 0;  // VmRSS, bytes
  int64_t peak = 0;     // VmHWM, bytes
};

// Of process `pid` ("self": this one); zeros where /proc cannot be read.
inline ResidentMemory residentMemory(const std::string& pid = "self") {
  ResidentMemory memory;
  std::ifstream status("/proc/" + pid + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("VmRSS:")) memory.current = std::atoll(line.c_str() + 6) * 1024;
    if (line.starts_with("VmHWM:")) memory.peak = std::atoll(line.c_str() + 6) * 1024;
  }
  return memory;
}

}  // namespace granary::bench
