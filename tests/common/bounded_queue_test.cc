#include "common/bounded_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace granary {
namespace {

using namespace std::chrono_literals;

TEST(BoundedQueue, HandsItemsOverInOrderAndEndsOnceClosedAndDrained) {
  BoundedQueue<int> queue(4);
  std::vector<int> taken;
  std::thread consumer([&] {
    while (auto item = queue.pop()) taken.push_back(*item);
  });
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(queue.push(i));
  queue.close();
  consumer.join();
  ASSERT_EQ(taken.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(taken[static_cast<size_t>(i)], i);
}

TEST(BoundedQueue, APushWaitsForRoomAndAClosedQueueRefusesIt) {
  BoundedQueue<int> queue(1);
  ASSERT_TRUE(queue.push(1));
  std::atomic<bool> pushed{false};
  std::thread producer([&] {
    EXPECT_TRUE(queue.push(2));
    pushed = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(pushed.load()) << "a full queue holds the push back";
  EXPECT_EQ(queue.pop(), 1);
  producer.join();
  EXPECT_TRUE(pushed.load());
  queue.close();
  EXPECT_FALSE(queue.push(3));
  EXPECT_EQ(queue.pop(), 2) << "what was pushed before the close is still handed out";
  EXPECT_EQ(queue.pop(), std::nullopt);
}

TEST(BoundedQueue, ClosingReleasesAPushThatWaitsForRoom) {
  BoundedQueue<int> queue(1);
  ASSERT_TRUE(queue.push(1));
  std::thread producer([&] { EXPECT_FALSE(queue.push(2)); });
  std::this_thread::sleep_for(20ms);
  queue.close();
  producer.join();
}

}  // namespace
}  // namespace granary
