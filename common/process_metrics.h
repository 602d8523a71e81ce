// The process series every Prometheus client library exports (process_cpu_seconds_total,
// process_resident_memory_bytes, process_start_time_seconds, ...), read from /proc/self at each
// scrape, so that dashboards and alerts see restarts and resource use of every binary, idle or
// not. Linux only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace granary {

struct ProcessStats {
  double cpuSeconds = 0;  // user + system
  int64_t residentBytes = 0;
  int64_t virtualBytes = 0;
  int64_t openFds = 0;
  int64_t maxFds = 0;
  double startTimeSeconds = 0;  // since the epoch
};

// From /proc/self/stat's text, the system's boot time (/proc/stat btime), clock ticks per
// second and page size. Nullopt when `stat` cannot be parsed.
std::optional<ProcessStats> parseProcessStat(std::string_view stat, int64_t bootTimeSeconds,
                                             int64_t ticksPerSecond, int64_t pageSize);

// This process' stats now; nullopt where /proc cannot be read.
std::optional<ProcessStats> readProcessStats();

// The text exposition (format 0.0.4) of `stats`: HELP, TYPE and one sample per series.
std::string processMetricsText(const ProcessStats& stats);

}  // namespace granary
