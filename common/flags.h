// One command-line parser for every granary binary, on CLI11. A binary declares its flags on a
// CLI::App and parses with parseCommandLine, so that all of them behave alike:
//   -h, --help   print the usage on standard output; exit code 0;
//   a bad flag   "<binary>: <what is wrong, naming the flag>" and a pointer to --help on standard
//                error; exit code 2 (unknown flags, missing values, values out of bounds).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace granary {

// Parses argv into the flags declared on `app`. nullopt: go on; otherwise the process should
// exit now with the returned code (0 after --help, 2 after a usage error, both printed).
std::optional<int> parseCommandLine(CLI::App& app, int argc, const char* const* argv);

// "" when `text` names a log level (debug, info, warn, error); otherwise what is wrong. A CLI11
// check: option->check(checkLogLevel).
std::string checkLogLevel(const std::string& text);

// --log-level: debug, info, warn or error, checked while parsing into `level`.
CLI::Option* addLogLevelFlag(CLI::App& app, std::string& level);

// Configures process-wide logging at a level that addLogLevelFlag (or the caller) checked.
void configureLoggingAt(const std::string& level);

}  // namespace granary
