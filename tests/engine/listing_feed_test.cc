#include "engine/listing_feed.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace granary::cache {
namespace {

using namespace std::chrono_literals;

std::vector<ManifestEntry> batchOf(const std::string& path) { return {{.path = path, .size = 1}}; }

// The paths of the batches a follower takes until the end, and how it ended.
std::pair<std::vector<std::string>, Status> drain(ListingFeed::Follower& follower) {
  std::vector<std::string> paths;
  for (;;) {
    auto next = follower.next(1s);
    if (!next.isOk()) return {paths, next.status()};
    if (!*next) return {paths, Status::ok()};
    for (const auto& entry : **next) paths.push_back(entry.path);
  }
}

TEST(ListingFeed, AFollowerGetsWhatIsPublishedAfterItCameThenTheEnd) {
  ListingFeed feed;
  EXPECT_EQ(feed.follow(), nullptr) << "no listing is open";
  feed.open();
  feed.publish(batchOf("before"), {});
  const auto follower = feed.follow();
  ASSERT_NE(follower, nullptr);
  feed.publish(batchOf("a"), {});
  feed.publish(batchOf("b"), {});
  feed.close(Status::ok());
  const auto [paths, end] = drain(*follower);
  EXPECT_EQ(paths, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(end.isOk()) << end;
  EXPECT_EQ(feed.follow(), nullptr) << "closed";
}

TEST(ListingFeed, AFollowerWaitingForTheNextBatchGetsAnEmptyOneMeanwhile) {
  ListingFeed feed;
  feed.open();
  const auto follower = feed.follow();
  auto next = follower->next(10ms);
  ASSERT_TRUE(next.isOk());
  ASSERT_NE(*next, nullptr);
  EXPECT_TRUE((*next)->empty());
}

TEST(ListingFeed, AListingAwaitsItsFollowersUntilTheyAllCameOrTheWaitIsOver) {
  ListingFeed feed;
  feed.open();
  const auto first = feed.follow();
  auto awaited = std::async(std::launch::async, [&] { feed.awaitFollowers(2, 10s, {}); });
  EXPECT_EQ(awaited.wait_for(100ms), std::future_status::timeout) << "one of two came";
  const auto second = feed.follow();
  EXPECT_EQ(awaited.wait_for(5s), std::future_status::ready) << "both came";
  // One that never comes is waited for no longer than asked.
  const auto start = std::chrono::steady_clock::now();
  feed.awaitFollowers(3, 200ms, {});
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  feed.close(Status::ok());
  feed.open();
  std::stop_source stop;
  stop.request_stop();
  feed.awaitFollowers(1, 10s, stop.get_token());  // returns at once: stopping
}

TEST(ListingFeed, AFailedListingEndsEveryFollowerWithItsError) {
  ListingFeed feed;
  feed.open();
  const auto first = feed.follow(), second = feed.follow();
  feed.publish(batchOf("a"), {});
  feed.close(unavailable("the origin is down"));
  for (const auto& follower : {first, second}) {
    const auto [paths, end] = drain(*follower);
    EXPECT_EQ(paths, std::vector<std::string>{"a"}) << "what came before the end is taken first";
    EXPECT_EQ(end.code(), StatusCode::kUnavailable);
    EXPECT_NE(end.message().find("the origin is down"), std::string::npos) << end;
  }
}

// A follower that takes nothing holds the listing back for the slow follower's time, then is
// dropped; one that keeps up is not, and a follower that left holds nothing back.
TEST(ListingFeed, AFollowerThatFallsBehindIsDroppedAndTheListingGoesOn) {
  ListingFeed feed(50ms);
  feed.open();
  const auto slow = feed.follow();
  auto keeping = feed.follow();
  auto left = feed.follow();
  left.reset();
  std::vector<std::string> kept;
  std::jthread taker([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      auto next = keeping->next(10ms);
      if (!next.isOk() || !*next) return;
      for (const auto& entry : **next) kept.push_back(entry.path);
    }
  });
  const int batches = static_cast<int>(ListingFeed::kFollowerQueue) + 2;
  for (int i = 0; i < batches; ++i) feed.publish(batchOf(std::to_string(i)), {});
  feed.close(Status::ok());
  taker.join();
  EXPECT_EQ(kept.size(), static_cast<size_t>(batches));
  const auto [paths, end] = drain(*slow);
  EXPECT_EQ(paths.size(), ListingFeed::kFollowerQueue) << "what it had queued, then dropped";
  EXPECT_EQ(end.code(), StatusCode::kUnavailable) << end;
  EXPECT_NE(end.message().find("fell behind"), std::string::npos) << end;
}

}  // namespace
}  // namespace granary::cache
