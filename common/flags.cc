#include "common/flags.h"

#include <cstdio>

#include "common/log.h"

namespace granary {

std::optional<int> parseCommandLine(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& error) {
    std::fprintf(stderr, "%s: %s\nRun %s --help for the options.\n", app.get_name().c_str(),
                 error.what(), app.get_name().c_str());
    return 2;
  }
}

std::string checkLogLevel(const std::string& text) {
  auto parsed = parseLogLevel(text);
  return parsed.isOk() ? std::string() : parsed.status().message();
}

CLI::Option* addLogLevelFlag(CLI::App& app, std::string& level) {
  return app.add_option("--log-level", level, "debug, info, warn or error (default: info)")
      ->check(checkLogLevel);
}

void configureLoggingAt(const std::string& level) {
  configureLogging({.level = parseLogLevel(level).valueOr(LogLevel::kInfo)});
}

}  // namespace granary
