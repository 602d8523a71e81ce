#include "engine/source_listing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

namespace granary::cache {
namespace {

// Hands out pages of 100 files, one of them with a path the manifest refuses, until `each`
// refuses a page or `pages` are handed out.
class PagedOrigin final : public Origin {
 public:
  PagedOrigin(int pages, int badPage) : pages_(pages), badPage_(badPage) {}
  Status list(const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    for (int page = 0; page < pages_; ++page) {
      std::vector<OriginObject> batch;
      for (int i = 0; i < 100; ++i) {
        batch.push_back({.path = (page == badPage_ && i == 50 ? "a//bad" : "d") +
                                 std::to_string(page) + "/f" + std::to_string(i),
                         .size = 1});
      }
      ++handedOut;
      GRANARY_RETURN_IF_ERROR(each(std::move(batch)));
    }
    return Status::ok();
  }
  Result<std::string> read(const std::string&, int64_t, int64_t, const std::string&) override {
    return unavailable("not read here");
  }
  std::atomic<int> handedOut{0};

 private:
  const int pages_, badPage_;
};

class SourceListingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("granary-source-listing-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    auto store = ManifestStore::open(dir_);
    ASSERT_TRUE(store.isOk()) << store.status();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Lists `origin` as one source of one part; the status and the totals stored.
  std::pair<Status, ManifestTotals> list(PagedOrigin* origin) {
    source_ = {"", std::unique_ptr<Origin>(origin)};
    ManifestTotals counted;
    const SourceListing listing{.manifests = *store_,
                                .generation = "ml/ds/1",
                                .source = source_,
                                .counted = [&](const ManifestTotals& t) { counted = t; }};
    ListingProgress progress{.ranges = {KeyRange{}}};
    const Status listed = listSource(listing, progress, {});
    return {listed, counted};
  }

  std::filesystem::path dir_;
  std::unique_ptr<ManifestStore> store_;
  DatasetSource source_;
};

TEST_F(SourceListingTest, EveryPageIsStoredWhileTheNextIsFetched) {
  auto* origin = new PagedOrigin(50, -1);
  const auto [listed, counted] = list(origin);
  ASSERT_TRUE(listed.isOk()) << listed;
  EXPECT_EQ(counted.files, 5000);
  EXPECT_EQ(store_->stat("ml/ds/1", "d49/f99")->size, 1);
}

// A page the store refuses ends the listing with the store's error, and the origin is asked for
// no more than the pages fetched ahead of it.
TEST_F(SourceListingTest, APageTheStoreRefusesEndsTheFetchWithTheStoresError) {
  auto* origin = new PagedOrigin(1000, 10);
  const auto [listed, counted] = list(origin);
  EXPECT_EQ(listed.code(), StatusCode::kInvalidArgument) << listed;
  EXPECT_NE(listed.message().find("a//bad"), std::string::npos) << listed;
  EXPECT_EQ(counted.files, 1000) << "the 10 pages before it";
  EXPECT_EQ(store_->stat("ml/ds/1", "d9/f99")->size, 1);
  EXPECT_EQ(store_->stat("ml/ds/1", "d10/f0").status().code(), StatusCode::kNotFound);
  // The refused page, those queued behind it, and one waiting to be queued when the store failed.
  EXPECT_LE(origin->handedOut.load(), 11 + 4 + 1);
}

}  // namespace
}  // namespace granary::cache
