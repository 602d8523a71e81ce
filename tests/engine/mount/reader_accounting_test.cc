// Reader accounting keeps about as many series as there are readers: a thousand short-lived
// readers leave nothing behind a grace after their processes are gone, and a pod's series go a
// grace after its volume is unpublished. Series name their reader by namespace and pod.
#include "engine/mount/reader_accounting.h"

#include <gtest/gtest.h>

#include <set>

#include "common/metrics.h"
#include "tests/support/fake_clock.h"

namespace granary::cache {
namespace {

size_t countOf(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(ReaderAccountingTest, AThousandShortLivedProcessesOfOneProgramShareOneSeries) {
  MetricsRegistry registry;
  auto metrics = CacheMetrics::create(registry);
  ASSERT_TRUE(metrics.isOk());
  // Each "thread" is a process of its own, outside any pod (local mode).
  ReaderAccounting accounting(
      metrics->get(), [](int tid) { return ProcessIdentity{.pid = tid, .command = "cat"}; });
  for (int pid = 1000; pid < 2000; ++pid)
    accounting.record("ml/coco", pid, {.localBytes = 4096, .wait = std::chrono::milliseconds(1)});
  EXPECT_EQ(accounting.readers().size(), 1000u);
  EXPECT_EQ(countOf(registry.exposition(), "granary_dataset_read_wait_seconds_total{"), 1u);
  EXPECT_NE(registry.exposition().find(R"(granary_dataset_read_bytes_total{dataset="ml/coco",namespace="",pod="process:cat",source="local"} 4096000)"),
            std::string::npos)
      << registry.exposition();

  const std::set<int> running = {1001, 1500, 1999};
  const auto alive = [&](int pid) { return running.contains(pid); };
  EXPECT_EQ(accounting.sweep(std::chrono::hours(1), alive), 0) << "ended, kept for the grace";
  EXPECT_EQ(accounting.readers().size(), 1000u);
  EXPECT_EQ(accounting.sweep(std::chrono::seconds(0), alive), 997);
  EXPECT_EQ(accounting.readers().size(), 3u);
  std::string text = registry.exposition();
  EXPECT_EQ(countOf(text, "granary_dataset_read_wait_seconds_total{"), 1u) << text;
  EXPECT_EQ(countOf(text, "granary_dataset_read_bytes_total{"), 3u) << "one program x 3 sources";
  EXPECT_NE(
      text.find(
          R"(granary_dataset_read_wait_seconds_total{dataset="ml/coco",namespace="",pod="process:cat"})"),
      std::string::npos)
      << "a process outside any pod: no namespace, its program as the pod";
  EXPECT_EQ(text.find("reader="), std::string::npos) << text;
  // The series go with the last of the program's processes.
  EXPECT_EQ(accounting.sweep(std::chrono::seconds(0), [](int) { return false; }), 3);
  text = registry.exposition();
  EXPECT_EQ(countOf(text, "granary_dataset_read_wait_seconds_total{"), 0u) << text;
}

TEST(ReaderAccountingTest, AProcessWhoseNameIsNotKnownIsLabelledByItsPid) {
  MetricsRegistry registry;
  auto metrics = CacheMetrics::create(registry);
  ASSERT_TRUE(metrics.isOk());
  ReaderAccounting accounting(metrics->get(), [](int tid) { return ProcessIdentity{.pid = tid}; });
  accounting.record("ml/coco", 77, {.localBytes = 1});
  EXPECT_NE(registry.exposition().find(R"(pod="pid:77")"), std::string::npos)
      << registry.exposition();
}

TEST(ReaderAccountingTest, APodWhoseNameIsNotKnownIsLabelledByItsUid) {
  MetricsRegistry registry;
  auto metrics = CacheMetrics::create(registry);
  ASSERT_TRUE(metrics.isOk());
  ReaderAccounting accounting(metrics->get(), [](int tid) {
    return ProcessIdentity{.pid = tid, .podUid = "0b1c2d3e-0000-4000-8000-000000000001"};
  });
  accounting.record("ml/coco", 10, {.originBytes = 7, .wait = std::chrono::milliseconds(2)});
  std::string text = registry.exposition();
  const std::string labels =
      R"(dataset="ml/coco",namespace="",pod="0b1c2d3e-0000-4000-8000-000000000001")";
  EXPECT_NE(text.find("granary_dataset_read_wait_seconds_total{" + labels + "}"), std::string::npos)
      << text;
  EXPECT_NE(text.find("granary_dataset_read_bytes_total{" + labels + R"(,source="origin"} 7)"),
            std::string::npos)
      << text;

  // Named later, the reader keeps the labels its series were made with, and they still go.
  accounting.namePod("0b1c2d3e-0000-4000-8000-000000000001", "ml", "resnet-worker-0");
  accounting.endPod("ml/coco", "0b1c2d3e-0000-4000-8000-000000000001");
  EXPECT_EQ(accounting.sweep(std::chrono::seconds(0), [](int) { return true; }), 1);
  text = registry.exposition();
  EXPECT_EQ(text.find("0b1c2d3e"), std::string::npos) << text;
  EXPECT_EQ(text.find("resnet-worker-0"), std::string::npos) << text;
}

TEST(ReaderAccountingTest, APodsSeriesGoAGraceAfterItsVolumeIsUnpublished) {
  MetricsRegistry registry;
  auto metrics = CacheMetrics::create(registry);
  ASSERT_TRUE(metrics.isOk());
  ReaderAccounting accounting(metrics->get(), [](int tid) {
    return ProcessIdentity{.pid = tid, .podUid = tid < 100 ? "uid-a" : "uid-b"};
  });
  accounting.namePod("uid-a", "ml", "resnet-worker-0");
  accounting.namePod("uid-b", "ml", "resnet-worker-1");
  for (const char* dataset : {"ml/coco", "ml/audio"}) {
    accounting.record(dataset, 10, {.localBytes = 1});
    accounting.record(dataset, 200, {.localBytes = 1});
  }
  const auto everyoneAlive = [](int) { return true; };
  accounting.endPod("ml/coco", "uid-a");
  accounting.endPod("ml/coco", "uid-b");
  accounting.record("ml/coco", 200, {.localBytes = 1});  // uid-b reads again: not ended
  EXPECT_EQ(accounting.sweep(std::chrono::hours(1), everyoneAlive), 0);
  EXPECT_EQ(accounting.sweep(std::chrono::seconds(0), everyoneAlive), 1);
  std::string text = registry.exposition();
  EXPECT_EQ(text.find(R"(dataset="ml/coco",namespace="ml",pod="resnet-worker-0")"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(dataset="ml/audio",namespace="ml",pod="resnet-worker-0")"),
            std::string::npos)
      << "its other volume is still published";
  EXPECT_EQ(accounting.readers().size(), 3u);

  accounting.endPod("ml/audio", "uid-a");
  EXPECT_EQ(accounting.sweep(std::chrono::seconds(0), everyoneAlive), 1);
  text = registry.exposition();
  EXPECT_EQ(text.find("resnet-worker-0"), std::string::npos) << text;
  EXPECT_EQ(countOf(text, R"(namespace="ml",pod="resnet-worker-1")"), 8u)
      << "2 datasets x (wait + 3 sources)";
  EXPECT_FALSE(processAlive(0x7ffffff0));
  EXPECT_TRUE(processAlive(::getpid()));
}

// A reader blocked in one long read is seen waiting while it waits, not only when the read
// ends: the telemetry and the data-starved judgement sample it every second.
TEST(ReaderAccountingTest, AReadStillBlockedCountsUpToNow) {
  testing::FakeClock clock;
  ReaderAccounting accounting(
      nullptr, [](int tid) { return ProcessIdentity{.pid = tid, .podUid = "uid-a"}; }, clock);
  accounting.namePod("uid-a", "ml", "bert-worker-0");
  const auto start = clock.monoNow();
  clock.advance(std::chrono::seconds(3));
  accounting.beginWait("ml/coco", 7, start);
  EXPECT_EQ(accounting.waitByPod().at("ml/bert-worker-0"), std::chrono::seconds(3));
  clock.advance(std::chrono::milliseconds(50));
  EXPECT_EQ(accounting.waitByPod().at("ml/bert-worker-0"), std::chrono::milliseconds(3050))
      << "it grows while blocked";

  clock.advance(std::chrono::milliseconds(50));
  const auto end = clock.monoNow();
  accounting.record("ml/coco", 7,
                    {.originBytes = 4096, .wait = end - start, .end = end, .waitBegan = start});
  EXPECT_EQ(accounting.waitByPod().at("ml/bert-worker-0"), std::chrono::milliseconds(3100))
      << "the read's whole wait, once";
  clock.advance(std::chrono::seconds(1));
  EXPECT_EQ(accounting.waitByPod().at("ml/bert-worker-0"), std::chrono::milliseconds(3100))
      << "no longer in flight";
}

}  // namespace
}  // namespace granary::cache
