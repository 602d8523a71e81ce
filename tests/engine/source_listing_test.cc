#include "engine/source_listing.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

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

// Lists each part as one page of one file (the part's last key), once as many parts are being
// listed as it waits for (or after 3 s); counts the most listed at once.
class PartedOrigin final : public Origin {
 public:
  explicit PartedOrigin(int awaited) : awaited_(awaited) {}
  bool listsInKeyOrder() const override { return true; }
  Status list(const std::function<Status(std::vector<OriginObject>&&)>&) override {
    return unavailable("listed in parts here");
  }
  Status listRange(const KeyRange& range,
                   const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    const int now = ++listing_;
    for (int most = mostAtOnce.load();
         now > most && !mostAtOnce.compare_exchange_weak(most, now);) {
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (mostAtOnce.load() < awaited_ && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const Status listed = each({{.path = range.through, .size = 1}});
    --listing_;
    return listed;
  }
  Result<std::string> read(const std::string&, int64_t, int64_t, const std::string&) override {
    return unavailable("not read here");
  }
  std::atomic<int> mostAtOnce{0};

 private:
  const int awaited_;
  std::atomic<int> listing_{0};
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

  // Lists the four parts "a" to "d" of `origin` with up to 4 listers, paced or not.
  Status listParts(PartedOrigin* origin, bool paced) {
    source_ = {"", std::unique_ptr<Origin>(origin)};
    const SourceListing listing{.manifests = *store_,
                                .generation = "ml/ds/1",
                                .source = source_,
                                .maxListers = 4,
                                .paced = paced};
    ListingProgress progress{.ranges = {{"", "a"}, {"a", "b"}, {"b", "c"}, {"c", "d"}}};
    return listSource(listing, progress, {});
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

// A paced listing starts with one lister (pages that come at once add none); an unpaced one, a
// share of a set's listing, lists its parts side by side from the start.
TEST_F(SourceListingTest, AnUnpacedListingListsEveryPartAtOnceFromTheStart) {
  auto* paced = new PartedOrigin(1);
  ASSERT_TRUE(listParts(paced, true).isOk());
  EXPECT_EQ(paced->mostAtOnce.load(), 1);
  auto* unpaced = new PartedOrigin(4);
  ASSERT_TRUE(listParts(unpaced, false).isOk());
  EXPECT_EQ(unpaced->mostAtOnce.load(), 4);
  for (const char* part : {"a", "b", "c", "d"}) EXPECT_EQ(store_->stat("ml/ds/1", part)->size, 1);
}

}  // namespace
}  // namespace granary::cache
