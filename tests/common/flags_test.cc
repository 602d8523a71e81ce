#include "common/flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace granary {
namespace {

// Parses `args` (after the program name) into an app with one bounded number and a log level.
struct Parsed {
  std::optional<int> exit;
  std::string out, err;
  int workers = 4;
  std::string level = "info";
};

Parsed parse(std::vector<std::string> args) {
  Parsed p;
  CLI::App app("a test binary", "granary-test");
  app.add_option("--workers", p.workers, "workers")->check(CLI::Range(1, 64));
  addLogLevelFlag(app, p.level);
  args.insert(args.begin(), "granary-test");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  p.exit = parseCommandLine(app, static_cast<int>(argv.size()), argv.data());
  p.out = ::testing::internal::GetCapturedStdout();
  p.err = ::testing::internal::GetCapturedStderr();
  return p;
}

TEST(FlagsTest, GoodFlagsSetTheirValuesAndTheBinaryGoesOn) {
  const Parsed p = parse({"--workers", "8", "--log-level", "debug"});
  EXPECT_EQ(p.exit, std::nullopt);
  EXPECT_EQ(p.workers, 8);
  EXPECT_EQ(p.level, "debug");
  EXPECT_EQ(p.err, "");
}

TEST(FlagsTest, HelpPrintsTheUsageAndExitsZero) {
  const Parsed p = parse({"--help"});
  EXPECT_EQ(p.exit, 0);
  EXPECT_NE(p.out.find("--workers"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("--log-level"), std::string::npos) << p.out;
}

TEST(FlagsTest, BadFlagsExitTwoNamingTheFlag) {
  const Parsed unknown = parse({"--wrokers", "8"});
  EXPECT_EQ(unknown.exit, 2);
  EXPECT_NE(unknown.err.find("granary-test: "), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("--wrokers"), std::string::npos) << unknown.err;

  const Parsed outOfRange = parse({"--workers", "0"});
  EXPECT_EQ(outOfRange.exit, 2);
  EXPECT_NE(outOfRange.err.find("--workers"), std::string::npos) << outOfRange.err;

  const Parsed missingValue = parse({"--workers"});
  EXPECT_EQ(missingValue.exit, 2);
  EXPECT_NE(missingValue.err.find("--workers"), std::string::npos) << missingValue.err;

  const Parsed level = parse({"--log-level", "loud"});
  EXPECT_EQ(level.exit, 2);
  EXPECT_NE(level.err.find("--log-level"), std::string::npos) << level.err;
  EXPECT_NE(level.err.find("loud"), std::string::npos) << level.err;
}

TEST(FlagsTest, CheckLogLevelNamesWhatIsWrong) {
  for (const char* good : {"debug", "info", "warn", "warning", "error", "INFO"})
    EXPECT_EQ(checkLogLevel(good), "") << good;
  EXPECT_NE(checkLogLevel("verbose"), "");
}

}  // namespace
}  // namespace granary
