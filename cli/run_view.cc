#include "cli/run_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "common/quantity.h"

namespace granary::cli {
namespace {

std::string percent(double share) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", std::clamp(share, 0.0, 1.0) * 100);
  return text;
}

std::string bytes(int64_t n) { return formatByteSize(ByteSize{n}); }

std::string fitted(std::string line, size_t width) {
  if (width > 1 && line.size() > width) line = line.substr(0, width - 1) + "~";
  return line;
}

std::string gpuText(const std::optional<double>& utilization) {
  return utilization ? "GPU " + percent(*utilization) : "no GPU";
}

// "12:03:04.5", local time.
std::string clockTime(std::chrono::system_clock::time_point at) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(at);
  const auto tenths =
      std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count() % 1000 /
      100;
  char text[32];
  std::strftime(text, sizeof text, "%H:%M:%S", std::localtime(&seconds));
  return std::string(text) + "." + std::to_string(tenths);
}

}  // namespace

std::string formatDuration(double seconds) {
  char text[32];
  if (seconds < 60)
    std::snprintf(text, sizeof text, "%.1fs", seconds);
  else
    std::snprintf(text, sizeof text, "%dm%02ds", static_cast<int>(seconds) / 60,
                  static_cast<int>(seconds) % 60);
  return text;
}

std::vector<std::string> liveViewLines(const RunView& view, size_t width) {
  std::vector<std::string> lines;
  std::string heading = view.job + "  " + formatDuration(view.elapsedSeconds) + "  attempt " +
                        std::to_string(view.attempt) + " of " + std::to_string(view.attempts);
  if (const auto& m = view.membership)
    heading += "  workers " + std::to_string(m->running) + "/" + std::to_string(m->wanted) + ", " +
               std::to_string(m->changes) + " membership change" + (m->changes == 1 ? "" : "s");
  lines.push_back(fitted(std::move(heading), width));
  for (const auto& dataset : view.datasets) lines.push_back(fitted("  " + dataset, width));
  for (const auto& w : view.workers) {
    std::string line = "  " + w.name + "  " + w.state + "  read " +
                       bytes(static_cast<int64_t>(w.readBytesPerSecond)) + "/s  data wait " +
                       percent(w.dataWaitShare) + "  " + gpuText(w.gpuUtilization);
    if (!w.lastLine.empty()) line += "  | " + w.lastLine;
    lines.push_back(fitted(std::move(line), width));
  }
  return lines;
}

std::vector<std::string> summaryLines(const RunSummary& s) {
  std::vector<std::string> lines;
  const std::string restarts = std::to_string(s.restarts) +
                               (s.membership ? " restart" : " gang restart") +
                               (s.restarts == 1 ? "" : "s");
  lines.push_back(s.job + " " + s.outcome + " in " + formatDuration(s.wallSeconds) + " (" +
                  restarts + ")");
  if (const auto& m = s.membership) {
    lines.push_back("  membership: " + std::to_string(m->changes.size()) + " change" +
                    (m->changes.size() == 1 ? "" : "s") + ", " +
                    formatDuration(m->secondsBelowWanted) + " below " + std::to_string(m->wanted) +
                    " workers");
    for (const auto& change : m->changes)
      lines.push_back("    " + clockTime(change.at) + " " +
                      std::string(api::membershipKindName(change.kind)) +
                      (change.worker.empty() ? "" : " " + change.worker) + " (" + change.cause +
                      "), " + std::to_string(change.running) + " running");
  }
  for (const auto& dataset : s.datasets) lines.push_back("  " + dataset);
  lines.push_back("  read " + bytes(s.localBytes + s.peerBytes + s.originBytes) + ": " +
                  bytes(s.localBytes) + " from the cache, " + bytes(s.originBytes) +
                  " from the origin" +
                  (s.peerBytes ? ", " + bytes(s.peerBytes) + " from peers" : ""));
  for (const auto& w : s.workers) {
    const double share = w.runSeconds > 0 ? w.dataWaitSeconds / w.runSeconds : 0;
    char wait[64];
    std::snprintf(wait, sizeof wait, "%.1fs", w.dataWaitSeconds);
    lines.push_back("  " + w.name + ": " + w.outcome + ", read " + bytes(w.bytesRead) +
                    ", data wait " + wait + " (" + percent(share) + " of " +
                    formatDuration(w.runSeconds) + "), " +
                    (w.gpuUtilization ? "GPU utilization " + percent(*w.gpuUtilization)
                                      : std::string("no GPU")));
  }
  return lines;
}

}  // namespace granary::cli
