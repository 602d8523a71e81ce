#include "common/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace granary {
namespace {

int64_t bootTime() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("btime ")) return std::stoll(line.substr(6));
  return 0;
}

int64_t openDescriptors() {
  std::error_code error;
  int64_t count = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error))
    ++count;
  return count;
}

void append(std::string& out, const char* name, const char* type, const char* help, double value) {
  char sample[64];
  const auto end = std::to_chars(sample, sample + sizeof sample - 1, value).ptr;  // shortest
  *end = '\0';
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
         name + " " + sample + "\n";
}

}  // namespace

std::optional<ProcessStats> parseProcessStat(std::string_view stat, int64_t bootTimeSeconds,
                                             int64_t ticksPerSecond, int64_t pageSize) {
  // Fields after "pid (comm)": state is field 3; utime 14, stime 15, starttime 22, vsize 23,
  // rss 24 (proc(5)). The command may hold spaces and parentheses: start after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || ticksPerSecond <= 0) return std::nullopt;
  std::istringstream fields{std::string(stat.substr(close + 1))};
  std::vector<std::string> values;
  for (std::string field; fields >> field;) values.push_back(field);
  if (values.size() < 22) return std::nullopt;  // values[0] is field 3
  const auto field = [&](int number) { return std::stod(values[number - 3]); };
  ProcessStats stats;
  stats.cpuSeconds = (field(14) + field(15)) / static_cast<double>(ticksPerSecond);
  stats.startTimeSeconds =
      static_cast<double>(bootTimeSeconds) + field(22) / static_cast<double>(ticksPerSecond);
  stats.virtualBytes = static_cast<int64_t>(field(23));
  stats.residentBytes = static_cast<int64_t>(field(24)) * pageSize;
  return stats;
}

std::optional<ProcessStats> readProcessStats() {
  std::ifstream in("/proc/self/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), {});
  auto stats = parseProcessStat(stat, bootTime(), ::sysconf(_SC_CLK_TCK), ::sysconf(_SC_PAGESIZE));
  if (!stats) return std::nullopt;
  stats->openFds = openDescriptors();
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) stats->maxFds = static_cast<int64_t>(limit.rlim_cur);
  return stats;
}

std::string processMetricsText(const ProcessStats& s) {
  std::string out;
  append(out, "process_cpu_seconds_total", "counter",
         "Total user and system CPU time spent in seconds.", s.cpuSeconds);
  append(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
         static_cast<double>(s.residentBytes));
  append(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
         static_cast<double>(s.virtualBytes));
  append(out, "process_open_fds", "gauge", "Number of open file descriptors.",
         static_cast<double>(s.openFds));
  append(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
         static_cast<double>(s.maxFds));
  append(out, "process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.", s.startTimeSeconds);
  return out;
}

}  // namespace granary
