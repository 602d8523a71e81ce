#include "engine/core/listing_pace.h"

#include <gtest/gtest.h>

namespace granary::cache {
namespace {

using std::chrono::milliseconds;

// Pages as a lister reports them until `pages` went by; the listers the pace ended with.
int listersAfter(ListingPace& pace, int pages, milliseconds waited, milliseconds stored) {
  for (int i = 0; i < pages; ++i) pace.page(waited, stored);
  return pace.listers();
}

TEST(ListingPaceTest, AnOriginFasterThanTheStoreKeepsOneLister) {
  ListingPace pace(8);
  EXPECT_EQ(listersAfter(pace, 1000, milliseconds(1), milliseconds(3)), 1);
}

TEST(ListingPaceTest, ASlowOriginGetsListersUntilTheStoreIsBusy) {
  ListingPace pace(8);
  // 20 ms a page, 3 ms to store one: listers are added until 20 ms is no more than 7 x 3.
  EXPECT_EQ(listersAfter(pace, 1000, milliseconds(20), milliseconds(3)), 7);
  ListingPace capped(4);
  EXPECT_EQ(listersAfter(capped, 1000, milliseconds(20), milliseconds(3)), 4);
}

TEST(ListingPaceTest, ANewListerSettlesBeforeAnotherIsAdded) {
  ListingPace pace(8);
  int started = 0;
  for (int i = 0; i < ListingPace::kIgnoredPages + ListingPace::kSettlePages; ++i)
    started += pace.page(milliseconds(50), milliseconds(1));
  EXPECT_EQ(started, 0) << "the first pages are ignored, then settle";
  EXPECT_TRUE(pace.page(milliseconds(50), milliseconds(1)));
  for (int i = 0; i < ListingPace::kSettlePages; ++i)
    EXPECT_FALSE(pace.page(milliseconds(50), milliseconds(1)));
  EXPECT_TRUE(pace.page(milliseconds(50), milliseconds(1)));
  EXPECT_EQ(pace.listers(), 3);
}

TEST(ListingPaceTest, ANearbyOriginKeepsOneListerThoughTheStoreIsFaster) {
  ListingPace pace(8);
  EXPECT_EQ(listersAfter(pace, 1000, milliseconds(8), milliseconds(1)), 1)
      << "8 ms a page: a store nearby, or cores busy";
  EXPECT_EQ(listersAfter(pace, 1000, milliseconds(12), milliseconds(1)), 8);
}

TEST(ListingPaceTest, AHostThatStallsNowAndThenKeepsOneLister) {
  ListingPace pace(8);
  for (int i = 0; i < 1000; ++i) pace.page(milliseconds(i % 3 == 0 ? 60 : 1), milliseconds(1));
  EXPECT_EQ(pace.listers(), 1) << "every third page 60 ms late: the origin answers in 1 ms";
  for (int i = 0; i < 1000; ++i) pace.page(milliseconds(i % 8 == 0 ? 30 : 20), milliseconds(1));
  EXPECT_EQ(pace.listers(), 8) << "every page 20 ms or more: the origin's latency";
}

TEST(ListingPaceTest, TheFirstPagesSayNothingOfThePace) {
  ListingPace pace(8);
  for (int i = 0; i < ListingPace::kIgnoredPages; ++i)
    pace.page(milliseconds(500), milliseconds(1));
  EXPECT_EQ(listersAfter(pace, 1000, milliseconds(1), milliseconds(3)), 1)
      << "a slow first request (a connection made) adds no lister";
}

TEST(ListingPaceTest, AnEndedListerMakesRoomForAnother) {
  ListingPace pace(2);
  EXPECT_EQ(listersAfter(pace, 100, milliseconds(20), milliseconds(1)), 2);
  pace.listerEnded();
  EXPECT_EQ(listersAfter(pace, 100, milliseconds(20), milliseconds(1)), 2);
}

}  // namespace
}  // namespace granary::cache
