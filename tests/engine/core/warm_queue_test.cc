#include "engine/core/warm_queue.h"

#include <gtest/gtest.h>

#include <thread>

#include "engine/core/warm_priorities.h"

namespace granary::cache {
namespace {

constexpr int64_t kChunk = 100;

WarmFile file(const std::string& path, int64_t size = kChunk) { return {path, size, "v1"}; }

// Everything the queue hands out from now on, as "path#index", finishing each chunk; feeds the
// scan from `scan` (one batch each time it asks) when it needs it.
std::vector<std::string> drain(WarmQueue& queue, std::vector<std::vector<WarmFile>> scan = {}) {
  std::vector<std::string> out;
  size_t batch = 0;
  while (true) {
    if (auto chunk = queue.next()) {
      out.push_back(chunk->warmFile().path + "#" + std::to_string(chunk->index));
      queue.finish(*chunk, true, true);
      continue;
    }
    if (!queue.needsScan()) return out;
    const bool last = batch + 1 >= scan.size();
    queue.addScan(batch < scan.size() ? scan[batch] : std::vector<WarmFile>{}, last);
    ++batch;
  }
}

TEST(WarmQueue, TheHintGoesFirstThenTheScanWithoutWhatTheHintHad) {
  WarmQueue queue(kChunk);
  queue.startPass({file("c"), file("a", 2 * kChunk), file("c")});
  EXPECT_FALSE(queue.needsScan());
  const auto order = drain(queue, {{file("a", 2 * kChunk), file("b")}, {file("c"), file("d")}});
  EXPECT_EQ(order, (std::vector<std::string>{"c#0", "a#0", "a#1", "b#0", "d#0"}));
  EXPECT_EQ(queue.handedOut(WarmClass::kHint), 2);
  EXPECT_EQ(queue.handedOut(WarmClass::kScan), 2);
  EXPECT_TRUE(queue.exhausted());
}

TEST(WarmQueue, AScanBatchWithNothingOwnedIsNotTheEnd) {
  WarmQueue queue(kChunk);
  queue.startPass({});
  EXPECT_TRUE(queue.needsScan());
  queue.addScan({}, /*last=*/false);
  EXPECT_FALSE(queue.next());
  EXPECT_TRUE(queue.needsScan());
  queue.addScan({file("x")}, /*last=*/true);
  EXPECT_EQ(drain(queue), std::vector<std::string>{"x#0"});
  EXPECT_FALSE(queue.needsScan());
}

// A reader waiting on a file goes before the hint, even in the middle of the file in progress;
// the hint goes before the scan.
TEST(WarmQueue, DemandGoesBeforeTheHintWhichGoesBeforeTheScan) {
  WarmQueue queue(kChunk);
  queue.startPass({file("h1", 3 * kChunk), file("h2")});
  auto first = queue.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->warmFile().path, "h1");
  EXPECT_EQ(first->from, WarmClass::kHint);
  queue.demand(file("s9", 2 * kChunk));  // a file only the scan would have reached
  queue.demand(file("h2"));              // a hinted file not handed out yet moves ahead
  queue.demand(file("h1", 3 * kChunk));  // under way already: nothing changes
  std::vector<std::string> order;
  std::vector<WarmClass> classes;
  while (auto chunk = queue.next()) {
    order.push_back(chunk->warmFile().path + "#" + std::to_string(chunk->index));
    classes.push_back(chunk->from);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"s9#0", "s9#1", "h2#0", "h1#1", "h1#2"}));
  EXPECT_EQ(classes[0], WarmClass::kDemand);
  EXPECT_EQ(classes[2], WarmClass::kDemand);
  EXPECT_EQ(classes[3], WarmClass::kHint);
  ASSERT_TRUE(queue.needsScan());
  queue.addScan({file("h2"), file("s9", 2 * kChunk), file("z")}, /*last=*/true);
  EXPECT_EQ(drain(queue), std::vector<std::string>{"z#0"}) << "each file once per pass";
}

TEST(WarmQueue, AFileIsWarmedWhenItsLastChunkFinishesAllOkAndSomeFetched) {
  WarmQueue queue(kChunk);
  queue.startPass({file("a", 2 * kChunk), file("b", 2 * kChunk), file("c")});
  auto a0 = *queue.next(), a1 = *queue.next();
  EXPECT_FALSE(queue.finish(a0, true, false));
  EXPECT_TRUE(queue.finish(a1, true, true));
  auto b0 = *queue.next(), b1 = *queue.next();
  EXPECT_FALSE(queue.finish(b1, false, true));
  EXPECT_FALSE(queue.finish(b0, true, true)) << "one chunk of b failed";
  auto c0 = *queue.next();
  EXPECT_FALSE(queue.finish(c0, true, false)) << "all on disk already: not warmed by this pass";
}

TEST(WarmQueue, EmptyFilesAreNotHandedOutAndANewPassStartsOver) {
  WarmQueue queue(kChunk);
  queue.startPass({file("empty", 0), file("a")});
  EXPECT_EQ(drain(queue, {{file("a")}}), std::vector<std::string>{"a#0"});
  queue.startPass({});
  EXPECT_EQ(drain(queue, {{file("a"), file("empty", 0)}}), std::vector<std::string>{"a#0"});
}

TEST(ParseAccessOrder, OnePathALineWithoutCommentsNorBlanks) {
  EXPECT_EQ(parseAccessOrder("# the order of epoch 1\n"
                             "train/b.bin\r\n"
                             "\n"
                             "   \n"
                             "  ./train/a.bin  \n"
                             "/train/c.bin\n"
                             "#train/skipped\n"
                             "last"),
            (std::vector<std::string>{"train/b.bin", "train/a.bin", "train/c.bin", "last"}));
  EXPECT_TRUE(parseAccessOrder("").empty());
  EXPECT_TRUE(parseAccessOrder("\n\n# only a comment\n").empty());
}

TEST(WarmPriorities, TheHighestPriorityGoesFirstAndEqualsGoTogether) {
  WarmPriorities priorities;
  auto low = priorities.enter(0);
  EXPECT_TRUE(low.mayGo());
  auto high = priorities.enter(10);
  auto high2 = priorities.enter(10);
  EXPECT_FALSE(low.mayGo());
  EXPECT_TRUE(high.mayGo());
  EXPECT_TRUE(high2.mayGo());
  high = WarmPriorities::Turn();  // its pass ended
  EXPECT_FALSE(low.mayGo()) << "another of priority 10 still warms";
  high2.setPriority(-1);  // its plan changed
  EXPECT_TRUE(low.mayGo());
  EXPECT_FALSE(high2.mayGo());
}

TEST(WarmPriorities, AHigherPriorityWaitingForItsOwnLimitLetsLowerOnesGo) {
  WarmPriorities priorities;
  auto low = priorities.enter(0);
  auto high = priorities.enter(10);
  auto middle = priorities.enter(5);
  EXPECT_FALSE(low.mayGo());
  high.waitingForOwnLimit(true);
  high.waitingForOwnLimit(true);  // two of its fetches wait
  EXPECT_TRUE(middle.mayGo());
  EXPECT_FALSE(low.mayGo()) << "priority 5 can still use what priority 0 would take";
  middle.waitingForOwnLimit(true);
  EXPECT_TRUE(low.mayGo());
  high.waitingForOwnLimit(false);
  EXPECT_TRUE(low.mayGo()) << "one fetch of priority 10 still waits for its limit";
  high.waitingForOwnLimit(false);
  EXPECT_FALSE(low.mayGo());
  EXPECT_FALSE(middle.mayGo());
}

TEST(WarmPriorities, AWaitEndsWhenTheHigherOneWaitsForItsOwnLimit) {
  WarmPriorities priorities;
  auto low = priorities.enter(0);
  auto high = priorities.enter(5);
  bool went = false;
  std::thread waiter([&] { went = low.wait({}); });
  high.waitingForOwnLimit(true);  // wakes the waiter whether it waits already or not
  waiter.join();
  EXPECT_TRUE(went);
}

TEST(WarmPriorities, AWaitEndsWhenTheHigherPassEndsOrOnStop) {
  WarmPriorities priorities;
  auto low = priorities.enter(0);
  auto high = std::make_unique<WarmPriorities::Turn>(priorities.enter(5));
  std::stop_source stop;
  bool stopped = true;
  std::thread waiter([&] { stopped = !low.wait(stop.get_token()); });
  high.reset();  // wakes the waiter whether it waits already or not
  waiter.join();
  EXPECT_FALSE(stopped);

  high = std::make_unique<WarmPriorities::Turn>(priorities.enter(5));
  std::thread stopping([&] { stopped = !low.wait(stop.get_token()); });
  stop.request_stop();
  stopping.join();
  EXPECT_TRUE(stopped);
}

}  // namespace
}  // namespace granary::cache
