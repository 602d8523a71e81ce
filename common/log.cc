#include "common/log.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "common/thread_annotations.h"

namespace granary {
namespace {

class StderrSink final : public LogSink {
 public:
  void write(LogLevel, std::string_view line) override {
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
};

struct LoggingState {
  Mutex mutex;  // also serializes sink writes
  LogOptions options GRANARY_GUARDED_BY(mutex);
};

LoggingState& state() {
  static LoggingState s;
  return s;
}

void appendField(std::string& line, std::string_view key, std::string_view value) {
  line += ' ';
  line += key;
  line += '=';
  line += logfmtValue(value);
}

}  // namespace

std::string_view logLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

Result<LogLevel> parseLogLevel(std::string_view text) {
  std::string lower(text);
  std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warn" || lower == "warning") return LogLevel::kWarn;
  if (lower == "error") return LogLevel::kError;
  return invalidArgument("log level \"" + std::string(text) +
                         "\" is not known; use debug, info, warn or error");
}

LogField::LogField(std::string_view k, double v) : key(k) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  value = buffer;
}

LogField::LogField(std::string_view k, std::chrono::duration<double> seconds) : key(k) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3fs", seconds.count());
  value = buffer;
}

void configureLogging(LogOptions options) {
  auto& s = state();
  MutexLock lock(s.mutex);
  s.options = std::move(options);
}

Logger::Logger(std::string component) : component_(std::move(component)) {}

Logger Logger::with(std::initializer_list<LogField> fields) const {
  Logger child = *this;
  child.bound_.insert(child.bound_.end(), fields.begin(), fields.end());
  return child;
}

bool Logger::enabled(LogLevel level) const {
  auto& s = state();
  MutexLock lock(s.mutex);
  return level >= s.options.level;
}

void Logger::log(LogLevel level, std::string_view message,
                 std::initializer_list<LogField> fields) const {
  auto& s = state();
  MutexLock lock(s.mutex);
  if (level < s.options.level) return;
  const Clock& clock = s.options.clock ? *s.options.clock : realClock();

  std::string line = "ts=" + formatTimestamp(clock.wallNow());
  appendField(line, "level", logLevelName(level));
  appendField(line, "component", component_);
  appendField(line, "msg", message);
  for (const auto& f : bound_) appendField(line, f.key, f.value);
  for (const auto& f : fields) appendField(line, f.key, f.value);

  if (!s.options.sink) s.options.sink = std::make_shared<StderrSink>();
  s.options.sink->write(level, line);
}

std::string logfmtValue(std::string_view value) {
  bool quote = value.empty();
  for (unsigned char c : value) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) {
      quote = true;
      break;
    }
  }
  if (!quote) return std::string(value);

  std::string out = "\"";
  for (unsigned char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < ' ' || c == 0x7f) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
          out += escaped;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string formatTimestamp(Clock::WallTime time) {
  using namespace std::chrono;
  const auto millis = duration_cast<milliseconds>(time.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(millis / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[96];
  std::snprintf(buffer, sizeof buffer, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(((millis % 1000) + 1000) % 1000));
  return buffer;
}

}  // namespace granary
