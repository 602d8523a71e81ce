// Structured logging: one line per event, logfmt `key=value` pairs, e.g.
//
//   ts=2026-11-21T13:01:23.123Z level=info component=cache-node msg="warm started"
//   dataset=ml/imagenet
//
// Usage:
//   Logger log("cache-node");
//   log.info("warm started", {{"dataset", key}, {"files", count}});
//
// Values are quoted when they hold spaces, quotes, '=' or control characters. A Secret
// logs as "<redacted>". Thread-safety: Logger is immutable and may be shared; lines from
// concurrent threads are never interleaved. The level, sink and clock are process-wide
// (configureLogging) and default to info, standard error and the real clock.
#pragma once

#include <chrono>
#include <concepts>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/secret.h"
#include "common/status.h"

namespace granary {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError };

std::string_view logLevelName(LogLevel level);
// Accepts debug, info, warn (or warning) and error, in any case.
Result<LogLevel> parseLogLevel(std::string_view text);

// One key=value pair; the value is rendered when the field is built.
struct LogField {
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(v ? v : "") {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, bool v) : key(k), value(v ? "true" : "false") {}
  LogField(std::string_view k, std::integral auto v) : key(k), value(std::to_string(v)) {}
  LogField(std::string_view k, double v);
  LogField(std::string_view k, const Secret&) : key(k), value("<redacted>") {}
  LogField(std::string_view k, const Status& v) : key(k), value(v.toString()) {}
  // Durations are logged in seconds with millisecond precision, e.g. "1.250s".
  template <typename Rep, typename Period>
  LogField(std::string_view k, std::chrono::duration<Rep, Period> d)
      : LogField(k, std::chrono::duration<double>(d)) {}
  LogField(std::string_view k, std::chrono::duration<double> seconds);

  std::string key;
  std::string value;
};

// Where finished lines go. write() is called with a lock held, one call per line
// (without the trailing newline), so implementations need no locking of their own.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void write(LogLevel level, std::string_view line) = 0;
};

struct LogOptions {
  // Lines below this level are dropped before they are formatted. Default info.
  LogLevel level = LogLevel::kInfo;
  // Destination; null means standard error.
  std::shared_ptr<LogSink> sink;
  // Source of the `ts` field; null means realClock(). Must outlive its use.
  const Clock* clock = nullptr;
};

// Replaces the process-wide logging configuration.
void configureLogging(LogOptions options);

class Logger {
 public:
  explicit Logger(std::string component);

  // A logger that adds `fields` to every line, after those of this one.
  Logger with(std::initializer_list<LogField> fields) const;

  bool enabled(LogLevel level) const;
  void log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields) const;
  void debug(std::string_view m, std::initializer_list<LogField> f = {}) const {
    log(LogLevel::kDebug, m, f);
  }
  void info(std::string_view m, std::initializer_list<LogField> f = {}) const {
    log(LogLevel::kInfo, m, f);
  }
  void warn(std::string_view m, std::initializer_list<LogField> f = {}) const {
    log(LogLevel::kWarn, m, f);
  }
  void error(std::string_view m, std::initializer_list<LogField> f = {}) const {
    log(LogLevel::kError, m, f);
  }

 private:
  std::string component_;
  std::vector<LogField> bound_;
};

// Renders one logfmt value: bare when safe, otherwise double-quoted with escapes.
std::string logfmtValue(std::string_view value);

// RFC 3339 UTC with milliseconds, e.g. 2026-11-21T13:01:23.123Z.
std::string formatTimestamp(Clock::WallTime time);

}  // namespace granary
