#include "common/kube/work_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "tests/support/fake_clock.h"

namespace granary::kube {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

TEST(WorkQueue, DeduplicatesQueuedKeys) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add("ml/a");
  queue.add("ml/b");
  queue.add("ml/a");
  EXPECT_EQ(queue.length(), 2u);
  EXPECT_EQ(queue.get()->key, "ml/a");
  EXPECT_EQ(queue.get()->key, "ml/b");
}

TEST(WorkQueue, AKeyInFlightIsNotHandedOutAgainUntilDone) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add("k");
  auto first = queue.get();
  ASSERT_TRUE(first);
  queue.add("k");  // changed while being processed
  EXPECT_EQ(queue.length(), 0u) << "not handed to a second worker";
  queue.done("k");
  EXPECT_EQ(queue.length(), 1u) << "processed again afterwards";
  auto second = queue.get();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->key, "k");
  queue.done("k");
  EXPECT_EQ(queue.length(), 0u);
}

TEST(WorkQueue, WaitedTimeIsMeasuredOnTheClock) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add("k");
  clock.advance(250ms);
  EXPECT_EQ(queue.get()->waited, 250ms);
}

TEST(WorkQueue, AddAfterWaitsForTheClockAndEarliestWins) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.addAfter("slow", 10s);
  queue.addAfter("fast", 3s);
  queue.addAfter("fast", 8s);  // later than the pending 3 s: ignored
  clock.waitForSleepers(1);
  EXPECT_EQ(queue.delayed(), 2u);
  EXPECT_EQ(queue.length(), 0u);

  clock.advance(3s);
  auto fast = queue.get();
  ASSERT_TRUE(fast);
  EXPECT_EQ(fast->key, "fast");
  queue.done("fast");
  EXPECT_EQ(queue.length(), 0u);

  clock.advance(7s);
  auto slow = queue.get();
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->key, "slow");
}

TEST(WorkQueue, ManyDelayedKeysComeOutInTheOrderTheyAreDueAndAMovedKeyOnce) {
  FakeClock clock;
  WorkQueue queue(clock);
  // Key i is due after 1 + (37 i mod 100) s: every second from 1 to 100 has one key.
  const auto delayOf = [](int i) { return std::chrono::seconds(1 + i * 37 % 100); };
  for (int i = 0; i < 100; ++i) queue.addAfter("k" + std::to_string(i), delayOf(i));
  queue.addAfter("k99", 500ms);  // moved from 64 s
  clock.waitForSleepers(1);
  EXPECT_EQ(queue.delayed(), 100u);
  clock.advance(500ms);
  EXPECT_EQ(queue.get()->key, "k99");
  queue.done("k99");
  std::map<std::chrono::seconds, std::string> due;
  for (int i = 0; i < 99; ++i) due[delayOf(i)] = "k" + std::to_string(i);
  auto now = std::chrono::milliseconds(500);
  for (const auto& [at, key] : due) {
    clock.advance(at - now);
    now = at;
    auto item = queue.get();  // k99's first deadline (64 s) would come out here, before k65's
    ASSERT_TRUE(item);
    EXPECT_EQ(item->key, key) << "at " << at.count() << " s";
    queue.done(item->key);
  }
  EXPECT_EQ(queue.delayed(), 0u);
  EXPECT_EQ(queue.length(), 0u);
}

TEST(WorkQueue, PerKeyBackoffDoublesAndForgetResets) {
  FakeClock clock;
  WorkQueue queue(clock, {.baseDelay = 5ms, .maxDelay = 40ms, .qps = 1e9, .burst = 1000000});
  const std::chrono::milliseconds expected[] = {5ms, 10ms, 20ms, 40ms, 40ms};
  for (auto delay : expected) {
    queue.addRateLimited("k");
    clock.waitForSleepers(1);
    clock.advance(delay - 1ms);
    EXPECT_EQ(queue.length(), 0u) << "not before " << delay.count() << " ms";
    clock.advance(1ms);
    auto item = queue.get();
    ASSERT_TRUE(item);
    queue.done("k");
  }
  EXPECT_EQ(queue.failures("k"), 5);
  queue.forget("k");
  EXPECT_EQ(queue.failures("k"), 0);
}

TEST(WorkQueue, GlobalTokenBucketSpacesOutBursts) {
  FakeClock clock;
  WorkQueue queue(clock, {.baseDelay = 1ms, .maxDelay = 1ms, .qps = 10, .burst = 2});
  for (const char* key : {"a", "b", "c", "d"}) queue.addRateLimited(key);
  clock.waitForSleepers(1);
  clock.advance(1ms);  // a and b use the burst
  ASSERT_TRUE(queue.get());
  ASSERT_TRUE(queue.get());
  EXPECT_EQ(queue.length(), 0u);
  clock.advance(99ms);  // c waits for one token at 10/s
  EXPECT_EQ(queue.get()->key, "c");
  EXPECT_EQ(queue.length(), 0u);
  clock.advance(100ms);
  EXPECT_EQ(queue.get()->key, "d");
}

TEST(WorkQueue, ShutDownDrainsThenStops) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.add("a");
  queue.add("b");
  auto inFlight = queue.get();
  ASSERT_TRUE(inFlight);
  std::thread finisher([&] { queue.done(inFlight->key); });
  queue.shutDownAndWait();
  finisher.join();
  queue.add("ignored");
  auto drained = queue.get();
  ASSERT_TRUE(drained);
  EXPECT_EQ(drained->key, "b");
  queue.done("b");
  EXPECT_FALSE(queue.get().has_value());
}

TEST(WorkQueue, ManyWorkersNeverShareAKey) {
  WorkQueue queue;
  std::mutex mutex;
  std::set<std::string> active;
  std::atomic<int> processed{0}, overlaps{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto item = queue.get()) {
        {
          std::lock_guard lock(mutex);
          if (!active.insert(item->key).second) ++overlaps;
        }
        std::this_thread::yield();
        {
          std::lock_guard lock(mutex);
          active.erase(item->key);
        }
        ++processed;
        queue.done(item->key);
      }
    });
  }
  for (int i = 0; i < 20000; ++i) queue.add("key-" + std::to_string(i % 7));
  queue.shutDownAndWait();
  queue.shutDown();
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(overlaps, 0);
  EXPECT_GT(processed, 0);
}

}  // namespace
}  // namespace granary::kube
