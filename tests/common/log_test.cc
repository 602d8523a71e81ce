#include "common/log.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "tests/support/fake_clock.h"

namespace granary {
namespace {

using namespace std::chrono_literals;

class CaptureSink : public LogSink {
 public:
  void write(LogLevel, std::string_view line) override { lines.emplace_back(line); }
  std::vector<std::string> lines;
};

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.setWall(std::chrono::sys_days(std::chrono::year(2026) / 11 / 21) + 13h + 1min + 23s +
                   123ms);
    configureLogging({.level = LogLevel::kInfo, .sink = sink_, .clock = &clock_});
  }
  void TearDown() override { configureLogging({}); }

  testing::FakeClock clock_;
  std::shared_ptr<CaptureSink> sink_ = std::make_shared<CaptureSink>();
};

TEST_F(LogTest, WritesOneStructuredLine) {
  Logger("cache-node").info("warm started", {{"dataset", "ml/imagenet"}, {"files", 1281167}});
  ASSERT_EQ(sink_->lines.size(), 1u);
  EXPECT_EQ(sink_->lines[0],
            "ts=2026-11-21T13:01:23.123Z level=info component=cache-node msg=\"warm started\" "
            "dataset=ml/imagenet files=1281167");
}

TEST_F(LogTest, DropsLinesBelowTheLevel) {
  Logger log("operator");
  log.debug("noise");
  EXPECT_FALSE(log.enabled(LogLevel::kDebug));
  EXPECT_TRUE(log.enabled(LogLevel::kWarn));
  log.warn("kept");
  ASSERT_EQ(sink_->lines.size(), 1u);
  EXPECT_NE(sink_->lines[0].find("level=warn"), std::string::npos);
}

TEST_F(LogTest, BoundFieldsComeBeforeCallFields) {
  Logger log = Logger("operator").with({{"controller", "dataset"}});
  log.error("reconcile failed", {{"error", notFound("ds/a")}});
  ASSERT_EQ(sink_->lines.size(), 1u);
  EXPECT_NE(sink_->lines[0].find("controller=dataset error=\"not_found: ds/a\""),
            std::string::npos);
}

TEST_F(LogTest, SecretsAreRedacted) {
  Secret key("AKIAEXAMPLESECRET");
  Logger("cache-node").info("origin", {{"secretAccessKey", key}});
  ASSERT_EQ(sink_->lines.size(), 1u);
  EXPECT_EQ(sink_->lines[0].find("AKIAEXAMPLESECRET"), std::string::npos);
  EXPECT_NE(sink_->lines[0].find("secretAccessKey=<redacted>"), std::string::npos);
}

TEST_F(LogTest, FormatsDurationsBooleansAndNumbers) {
  Logger("x").info("m", {{"wait", 1250ms}, {"ready", true}, {"ratio", 0.25}});
  EXPECT_NE(sink_->lines.at(0).find("wait=1.250s ready=true ratio=0.25"), std::string::npos);
}

TEST_F(LogTest, ConcurrentLinesAreNeverInterleaved) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 200; ++i) Logger("t").info("line", {{"thread", t}, {"i", i}});
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_EQ(sink_->lines.size(), 800u);
  for (const auto& line : sink_->lines) {
    EXPECT_EQ(line.rfind("ts=", 0), 0u);
    EXPECT_EQ(std::count(line.begin(), line.end(), '='), 6);
  }
}

TEST(Logfmt, QuotesOnlyWhenNeeded) {
  EXPECT_EQ(logfmtValue("plain"), "plain");
  EXPECT_EQ(logfmtValue(""), "\"\"");
  EXPECT_EQ(logfmtValue("two words"), "\"two words\"");
  EXPECT_EQ(logfmtValue("a=b"), "\"a=b\"");
  EXPECT_EQ(logfmtValue("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(logfmtValue("line\nbreak"), "\"line\\nbreak\"");
  EXPECT_EQ(logfmtValue(std::string("nul\0x", 5)), "\"nul\\x00x\"");
  EXPECT_EQ(logfmtValue("back\\slash"), "\"back\\\\slash\"");
}

TEST(LogLevel, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(*parseLogLevel("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(*parseLogLevel("warning"), LogLevel::kWarn);
  EXPECT_EQ(*parseLogLevel("error"), LogLevel::kError);
  auto bad = parseLogLevel("loud");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message(),
            "log level \"loud\" is not known; use debug, info, warn or error");
}

TEST(Timestamp, FormatsUtcWithMilliseconds) {
  const auto epoch = Clock::WallTime{};
  EXPECT_EQ(formatTimestamp(epoch + 1500ms), "1970-01-01T00:00:01.500Z");
}

}  // namespace
}  // namespace granary
