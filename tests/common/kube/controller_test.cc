// The controller's handling of each ReconcileResult: done, after(d), a retryable error and a
// terminal error, on a FakeClock and one worker. Each test uses a second key as a barrier: with
// one worker, a reconcile of "barrier" starts only once the previous key was settled and
// counted (the barrier's own count, "success", may still be on its way).
#include "common/kube/controller.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "tests/support/fake_clock.h"

namespace granary::kube {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

class ControllerTest : public ::testing::Test {
 protected:
  // Runs a one-worker controller whose reconcile of "ns/object" returns `outcome` and of
  // "ns/barrier" returns done().
  void start(std::function<Result<ReconcileResult>()> outcome) {
    auto metrics = RuntimeMetrics::declare(registry_);
    ASSERT_TRUE(metrics.isOk()) << metrics.status();
    metrics_ = std::make_unique<RuntimeMetrics>(std::move(*metrics));
    controller_ = std::make_unique<Controller>(
        ControllerOptions{.name = "test", .workers = 1},
        [this, outcome](const std::string& key, std::stop_token) -> Result<ReconcileResult> {
          std::lock_guard lock(mutex_);
          ++calls_[key];
          called_.notify_all();
          if (key == "ns/object") return outcome();
          return ReconcileResult::done();
        },
        clock_, metrics_.get());
    thread_ = std::jthread([this](std::stop_token stop) { controller_->run(stop); });
  }
  void TearDown() override {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }

  // Waits until `key` was reconciled `count` times.
  void waitForCalls(const std::string& key, int count) {
    std::unique_lock lock(mutex_);
    called_.wait(lock, [&] { return calls_[key] >= count; });
  }
  int calls(const std::string& key) {
    std::lock_guard lock(mutex_);
    return calls_[key];
  }
  // Enqueues the barrier and waits for it: every earlier reconcile has been settled.
  void settle() {
    const int before = calls("ns/barrier");
    controller_->enqueue("ns/barrier");
    waitForCalls("ns/barrier", before + 1);
  }
  double count(const std::string& result) {
    const std::string series =
        "granary_controller_reconciles_total{controller=\"test\",result=\"" + result + "\"} ";
    const std::string text = registry_.exposition();
    const size_t at = text.find(series);
    if (at == std::string::npos) return 0;
    return std::stod(text.substr(at + series.size()));
  }

  FakeClock clock_;
  MetricsRegistry registry_;
  std::unique_ptr<RuntimeMetrics> metrics_;
  std::unique_ptr<Controller> controller_;
  std::mutex mutex_;
  std::condition_variable called_;
  std::map<std::string, int> calls_;
  std::jthread thread_;
};

// Dashboards divide errors by reconciles and sum retries: those series exist at 0 from the
// start, so "nothing failed" reads 0, not "no data".
TEST_F(ControllerTest, EverySeriesExistsAtZeroBeforeTheFirstReconcile) {
  start([] { return ReconcileResult::done(); });
  const std::string text = registry_.exposition();
  for (const char* result : {"success", "requeue", "error", "terminal"}) {
    EXPECT_NE(text.find("granary_controller_reconciles_total{controller=\"test\",result=\"" +
                        std::string(result) + "\"} 0"),
              std::string::npos)
        << result << " in\n"
        << text;
  }
  EXPECT_NE(text.find("granary_workqueue_retries_total{controller=\"test\"} 0"), std::string::npos)
      << text;
}

TEST_F(ControllerTest, DoneIsNotReconciledAgainUntilAnEvent) {
  start([] { return ReconcileResult::done(); });
  controller_->enqueue("ns/object");
  waitForCalls("ns/object", 1);
  settle();
  EXPECT_EQ(controller_->queue().delayed(), 0u);
  EXPECT_EQ(count("requeue") + count("error") + count("terminal"), 0);
  controller_->enqueue("ns/object");
  waitForCalls("ns/object", 2);
}

TEST_F(ControllerTest, AfterRequeuesOnceTheDelayPassed) {
  start([] { return ReconcileResult::after(30s); });
  controller_->enqueue("ns/object");
  waitForCalls("ns/object", 1);
  settle();
  EXPECT_EQ(controller_->queue().delayed(), 1u);
  EXPECT_EQ(count("requeue"), 1);
  clock_.waitForSleepers(1);
  clock_.advance(29s);
  settle();
  EXPECT_EQ(calls("ns/object"), 1) << "not before the delay";
  clock_.advance(1s);
  waitForCalls("ns/object", 2);
  EXPECT_EQ(controller_->queue().failures("ns/object"), 0) << "a requeue is not a failure";
}

TEST_F(ControllerTest, ARetryableErrorComesBackWithBackoff) {
  int attempts = 0;
  start([&attempts]() -> Result<ReconcileResult> {
    if (++attempts < 3) return unavailable("node unreachable");
    return ReconcileResult::done();
  });
  controller_->enqueue("ns/object");
  waitForCalls("ns/object", 1);
  settle();
  EXPECT_EQ(controller_->queue().failures("ns/object"), 1);
  EXPECT_EQ(controller_->queue().delayed(), 1u);
  clock_.waitForSleepers(1);
  clock_.advance(5ms);  // the first backoff
  waitForCalls("ns/object", 2);
  settle();
  clock_.waitForSleepers(1);
  clock_.advance(10ms);  // doubled
  waitForCalls("ns/object", 3);
  settle();
  EXPECT_EQ(count("error"), 2);
  EXPECT_EQ(controller_->queue().failures("ns/object"), 0) << "forgotten after success";
}

// Lines logged at warn or above, kept for a test to read.
class WarningLines final : public LogSink {
 public:
  void write(LogLevel level, std::string_view line) override {
    if (level >= LogLevel::kWarn) lines += std::string(line) + "\n";
  }
  std::string lines;
};

// A write that raced another (409 Conflict: the informer's copy was older than the server's) is
// tried again at once from the newer copy: a requeue, neither a warning nor an error.
TEST_F(ControllerTest, AConflictIsTriedAgainAtOnceWithoutAWarningOrAnError) {
  auto sink = std::make_shared<WarningLines>();
  configureLogging({.sink = sink});
  int attempts = 0;
  start([&attempts]() -> Result<ReconcileResult> {
    if (++attempts < 2)
      return conflict("PUT .../trainingjobs/a/status: the object has been modified");
    return ReconcileResult::done();
  });
  controller_->enqueue("ns/object");
  waitForCalls("ns/object", 1);
  settle();
  clock_.waitForSleepers(1);
  clock_.advance(5ms);  // the first backoff
  waitForCalls("ns/object", 2);
  settle();
  configureLogging({});
  EXPECT_EQ(count("error"), 0);
  EXPECT_EQ(count("requeue"), 1);
  EXPECT_EQ(sink->lines, "");
}

TEST_F(ControllerTest, ATerminalErrorIsCountedAndNotRetriedUntilTheObjectChanges) {
  start([] {
    return ReconcileResult::terminal(invalidArgument("spec.cache.replicas: expected 1 to 16"));
  });
  controller_->enqueue("ns/object");
  waitForCalls("ns/object", 1);
  settle();
  EXPECT_EQ(count("terminal"), 1);
  EXPECT_EQ(count("error"), 0);
  EXPECT_EQ(controller_->queue().delayed(), 0u) << "no retry is scheduled";
  EXPECT_EQ(controller_->queue().failures("ns/object"), 0);
  clock_.advance(2000s);  // past the longest backoff
  settle();
  EXPECT_EQ(calls("ns/object"), 1);
  controller_->enqueue("ns/object");  // the object changed
  waitForCalls("ns/object", 2);
  settle();
  EXPECT_EQ(count("terminal"), 2);
}

TEST(ReconcileResult, TerminalTakesPrecedenceAndDoneIsNeither) {
  EXPECT_FALSE(ReconcileResult::done().isTerminal());
  EXPECT_EQ(ReconcileResult::done().requeueAfter, Clock::Duration::zero());
  EXPECT_EQ(ReconcileResult::after(3s).requeueAfter, 3s);
  EXPECT_TRUE(ReconcileResult::terminal(invalidArgument("bad")).isTerminal());
}

}  // namespace
}  // namespace granary::kube
