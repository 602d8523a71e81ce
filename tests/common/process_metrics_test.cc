// The process series: /proc/self/stat parsed as proc(5) lays it out (a command with spaces and
// parentheses included), and this process' own figures in the exposition.
#include "common/process_metrics.h"

#include <gtest/gtest.h>

namespace granary {
namespace {

TEST(ProcessMetricsTest, ParsesStatAfterTheCommand) {
  // Fields 3.. : state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
  // utime(14)=250 stime(15)=50 ... starttime(22)=1000 vsize(23) rss(24) in pages.
  const std::string stat =
      "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1000 "
      "123456789 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
  const auto stats = parseProcessStat(stat, 1'700'000'000, 100, 4096);
  ASSERT_TRUE(stats);
  EXPECT_DOUBLE_EQ(stats->cpuSeconds, 3.0);
  EXPECT_DOUBLE_EQ(stats->startTimeSeconds, 1'700'000'010.0);
  EXPECT_EQ(stats->virtualBytes, 123456789);
  EXPECT_EQ(stats->residentBytes, 300 * 4096);
  EXPECT_FALSE(parseProcessStat("4242 (truncated) S 1 2", 0, 100, 4096));
  EXPECT_FALSE(parseProcessStat("no command at all", 0, 100, 4096));
}

TEST(ProcessMetricsTest, ThisProcessIsExposed) {
  const auto stats = readProcessStats();
  ASSERT_TRUE(stats);
  EXPECT_GT(stats->residentBytes, 0);
  EXPECT_GT(stats->openFds, 2);
  EXPECT_GE(stats->maxFds, stats->openFds);
  EXPECT_GT(stats->startTimeSeconds, 1.6e9);
  const std::string text = processMetricsText(*stats);
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nprocess_start_time_seconds 1"), std::string::npos) << text;
}

}  // namespace
}  // namespace granary
