// A dataset refreshed on one node (CacheEngine::refresh): a file:// origin changed under a Ready
// dataset, listed again as a new version beside the one served, every byte of both compared with
// what the origin held when each was made.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "engine/engine.h"
#include "engine/local_versions.h"
#include "tests/engine/test_node.h"
#include "tests/support/s3rver.h"

namespace granary::cache {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// One node's engine in a temporary directory, and what the origin holds now, by path.
class VersionsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    engine_.reset();
    if (!root_.empty()) fs::remove_all(root_);
  }
  virtual EnsureSpec spec(int64_t generation) const = 0;

  void makeRoot(const std::string& name) {
    root_ = fs::temp_directory_path() /
            (name + "-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  // Opens the engine on root_ (again, as the next process would).
  void openEngine(std::vector<fs::path> fileOriginRoots = {}) {
    engine_.reset();
    EngineOptions options{.nodeName = "node-a",
                          .stateDirectory = root_ / "state",
                          .cacheDirectories = {{root_ / "cache", 256 << 20}},
                          .defaultChunkSize = 4096};
    options.origins.fileOriginRoots = std::move(fileOriginRoots);
    engine_ = std::move(*CacheEngine::open(options, realClock(), nullptr, nullptr));
  }
  std::shared_ptr<DatasetCache> ready(int64_t generation) {
    auto cache = engine_->ensure(spec(generation));
    EXPECT_TRUE(cache.isOk()) << cache.status();
    if (!cache.isOk()) return nullptr;
    EXPECT_EQ((*cache)->waitSettled(30s).phase, Phase::kReady) << (*cache)->state().message;
    return *cache;
  }
  // Every file `expected` names reads as it says.
  static void expectReads(DatasetCache& version,
                          const std::map<std::string, std::string>& expected) {
    for (const auto& [path, bytes] : expected) {
      auto read = version.read(path, 0, -1);
      ASSERT_TRUE(read.isOk()) << path << ": " << read.status();
      EXPECT_EQ(*read, bytes) << path;
    }
  }

  fs::path root_;
  std::map<std::string, std::string> held_;  // what the origin holds now
  std::unique_ptr<CacheEngine> engine_;
};

class RefreshTest : public VersionsTest {
 protected:
  void SetUp() override {
    makeRoot("granary-refresh");
    origin_ = root_ / "origin";
    for (int i = 0; i < 20; ++i) {
      write("shards/" + std::to_string(i) + ".bin", testing::randomBytes(3000 + i * 700, i));
    }
    write("a.txt", "one");
    write("b.txt", "two");
    reopen();
  }
  void reopen() { openEngine({origin_}); }

  void write(const std::string& path, const std::string& bytes) {
    fs::create_directories((origin_ / path).parent_path());
    std::ofstream(origin_ / path, std::ios::binary | std::ios::trunc) << bytes;
    held_[path] = bytes;
  }
  void remove(const std::string& path) {
    fs::remove(origin_ / path);
    held_.erase(path);
  }

  EnsureSpec spec(int64_t generation) const override {
    EnsureSpec spec;
    spec.key = {"ml", "train", generation, "uid-1"};
    spec.mounts = {{"", {.uri = "file://" + origin_.string()}}};
    return spec;
  }
  // Every file `expected` names reads as it says, and the version holds no other file.
  static void expectHolds(DatasetCache& version,
                          const std::map<std::string, std::string>& expected) {
    int64_t files = 0;
    auto top = version.list("", "", 1000);
    ASSERT_TRUE(top.isOk()) << top.status();
    for (const auto& entry : *top) files += entry.directory ? 0 : 1;
    auto shards = version.list("shards", "", 1000);
    ASSERT_TRUE(shards.isOk()) << shards.status();
    files += static_cast<int64_t>(shards->size());
    EXPECT_EQ(files, static_cast<int64_t>(expected.size()));
    expectReads(version, expected);
  }
  DatasetKey newest() const { return {"ml", "train", 0, "uid-1"}; }

  fs::path origin_;
};

TEST_F(RefreshTest, ANewVersionHoldsTheOriginAsItIsNowAndTheOldOneAsItWas) {
  auto first = ready(1);
  ASSERT_TRUE(first);
  const auto before = held_;
  write("a.txt", "one, fixed");
  write("c.txt", "three");
  remove("b.txt");

  auto changes = engine_->refresh(newest(), 2, {});
  ASSERT_TRUE(changes.isOk()) << changes.status();
  EXPECT_EQ(*changes, (ManifestChanges{.added = 1,
                                       .changed = 1,
                                       .removed = 1,
                                       .unchanged = 20,
                                       .addedBytes = 5,
                                       .changedBytes = 10}));
  auto second = ready(2);
  ASSERT_TRUE(second);
  expectHolds(*second, held_);
  expectHolds(*first, before);
  EXPECT_EQ(second->stat("b.txt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(first->stat("c.txt").status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*engine_->find(newest()))->key().generation, 2);
}

TEST_F(RefreshTest, UnchangedFilesAreTakenFromTheVersionBeforeNotFetched) {
  ASSERT_TRUE(ready(1));
  const auto before = held_;
  write("a.txt", "one, fixed");
  ASSERT_TRUE(engine_->refresh(newest(), 2, {}).isOk());
  // Whatever the new version fetched from the origin now would fail: only a.txt is left there.
  for (const auto& [path, _] : before) {
    if (path != "a.txt") fs::remove(origin_ / path);
  }
  auto second = ready(2);
  ASSERT_TRUE(second);
  auto expected = before;
  expected["a.txt"] = "one, fixed";
  expectHolds(*second, expected);
}

// A version keeps naming a file the origin removed; where the cache does not hold it, a read of
// it fails and says so, and is never answered from another version.
TEST_F(RefreshTest, AFileRemovedAtTheOriginIsAnErrorInTheVersionThatNamesIt) {
  EnsureSpec lazy = spec(1);
  lazy.settings.warm = WarmMode::kNever;  // nothing cached but what is read
  auto first = engine_->ensure(lazy);
  ASSERT_TRUE(first.isOk()) << first.status();
  ASSERT_EQ((*first)->waitSettled(20s).phase, Phase::kOnDemand);
  remove("b.txt");
  write("a.txt", "one, fixed");
  ASSERT_TRUE(engine_->refresh((*first)->key(), 2, {}).isOk());
  auto second = ready(2);
  ASSERT_TRUE(second);
  auto removed = (*first)->read("b.txt", 0, -1);
  ASSERT_FALSE(removed.isOk());
  EXPECT_EQ(removed.status().code(), StatusCode::kNotFound) << removed.status();
  EXPECT_NE(removed.status().message().find("b.txt"), std::string::npos) << removed.status();
  auto changed = (*first)->read("a.txt", 0, -1);  // version 2 holds the new a.txt, not this one's
  EXPECT_FALSE(changed.isOk() && *changed == "one, fixed");
}

TEST_F(RefreshTest, AnOriginWithoutChangeMakesNoVersion) {
  ASSERT_TRUE(ready(1));
  auto changes = engine_->refresh(newest(), 2, {});
  ASSERT_TRUE(changes.isOk()) << changes.status();
  EXPECT_FALSE(changes->any());
  EXPECT_EQ(changes->unchanged, 22);
  EXPECT_EQ(engine_->find({"ml", "train", 2, "uid-1"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(*engine_->listedVersions(spec(1).key), std::vector<int64_t>{1});
  // Nothing of the listing is kept: a refresh that finds a change later lists it whole again.
  write("c.txt", "three");
  auto later = engine_->refresh(newest(), 2, {});
  ASSERT_TRUE(later.isOk()) << later.status();
  EXPECT_EQ(later->added, 1);
  EXPECT_EQ(later->unchanged, 22);
}

TEST_F(RefreshTest, ARefreshCutShortLeavesTheVersionServedAsItWas) {
  auto first = ready(1);
  ASSERT_TRUE(first);
  const auto before = held_;
  write("c.txt", "three");
  std::stop_source stop;
  stop.request_stop();
  EXPECT_FALSE(engine_->refresh(newest(), 2, stop.get_token()).isOk());
  fs::rename(origin_, root_ / "gone");  // an origin that fails
  EXPECT_FALSE(engine_->refresh(newest(), 2, {}).isOk());
  EXPECT_EQ(engine_->find({"ml", "train", 2, "uid-1"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ((*engine_->find(newest()))->key().generation, 1);
  expectHolds(*first, before);
  fs::rename(root_ / "gone", origin_);
  auto changes = engine_->refresh(newest(), 2, {});
  ASSERT_TRUE(changes.isOk()) << changes.status();
  EXPECT_EQ(changes->added, 1);
}

TEST_F(RefreshTest, ANewVersionIsAboveTheOneServedAndNotHeldYet) {
  ASSERT_TRUE(ready(1));
  EXPECT_EQ(engine_->refresh(newest(), 1, {}).status().code(), StatusCode::kInvalidArgument);
  write("c.txt", "three");
  ASSERT_TRUE(engine_->refresh(newest(), 2, {}).isOk());
  ASSERT_TRUE(ready(2));
  EXPECT_EQ(engine_->refresh({"ml", "train", 1, "uid-1"}, 2, {}).status().code(),
            StatusCode::kFailedPrecondition);
}

// Local mode: the newest version is served by the commands after the refresh that made it; the
// one before is held until the newest is Ready, then purged with its chunks.
TEST_F(RefreshTest, LocalModeServesTheNewestVersionAndRetiresTheOldOnes) {
  auto first = ensureNewestVersion(*engine_, spec(1));
  ASSERT_TRUE(first.isOk()) << first.status();
  ASSERT_EQ((*first)->waitSettled(20s).phase, Phase::kReady);
  write("a.txt", "one, fixed");
  auto refreshed = refreshLocally(*engine_, *first, spec(1), {});
  ASSERT_TRUE(refreshed.isOk()) << refreshed.status();
  EXPECT_EQ(refreshed->summary,
            "refreshed: version 2, 0 added, 1 changed, 0 removed, 21 unchanged");
  ASSERT_EQ(refreshed->serving->key().generation, 2);
  ASSERT_EQ(refreshed->serving->waitSettled(20s).phase, Phase::kReady);
  EXPECT_TRUE(retireOlderVersions(*engine_, *refreshed->serving));
  EXPECT_EQ(*engine_->listedVersions(spec(1).key), std::vector<int64_t>{2});
  EXPECT_EQ(engine_->find(spec(1).key).status().code(), StatusCode::kNotFound);
  expectHolds(*refreshed->serving, held_);

  // The next command, with the spec's own generation, 1.
  reopen();
  auto next = ensureNewestVersion(*engine_, spec(1));
  ASSERT_TRUE(next.isOk()) << next.status();
  EXPECT_EQ((*next)->key().generation, 2);
  EXPECT_EQ((*next)->waitSettled(20s).phase, Phase::kReady);
  expectHolds(**next, held_);
  auto again = refreshLocally(*engine_, *next, spec(1), {});
  ASSERT_TRUE(again.isOk()) << again.status();
  EXPECT_EQ(again->summary, "refreshed: the origin is unchanged (22 files)");
  EXPECT_EQ(again->serving, *next);
}

// A process that stops in the middle of a refresh (its listing cut short after the first batch of
// many) leaves a partial listing that no later command serves: the next one serves the version
// before, whole, and its refresh lists the origin again from the start, so a change made since the
// cut is seen.
TEST_F(RefreshTest, ARefreshStoppedHalfWayIsNeverServed) {
  for (int i = 0; i < 9000; ++i) write("many/" + std::to_string(i), std::to_string(i));
  auto first = ensureNewestVersion(*engine_, spec(1));
  ASSERT_TRUE(first.isOk()) << first.status();
  ASSERT_EQ((*first)->waitSettled(60s).phase, Phase::kReady);
  const auto before = held_;
  write("c.txt", "three");
  std::stop_source stop;
  int64_t stored = 0;
  auto cut = engine_->refresh((*first)->key(), 2, stop.get_token(), [&](const ManifestTotals& t) {
    stored = t.files;
    stop.request_stop();
  });
  ASSERT_FALSE(cut.isOk());
  ASSERT_GT(stored, 0);
  ASSERT_LT(stored, 9023) << "the listing was to be cut short";
  write("a.txt", "one, fixed");  // after the cut
  reopen();
  EXPECT_EQ(*engine_->listedVersions(spec(1).key), std::vector<int64_t>{1});
  auto again = ensureNewestVersion(*engine_, spec(1));
  ASSERT_TRUE(again.isOk()) << again.status();
  EXPECT_EQ((*again)->key().generation, 1);
  ASSERT_EQ((*again)->waitSettled(60s).phase, Phase::kReady);
  EXPECT_EQ(*(*again)->read("a.txt", 0, -1), before.at("a.txt"));
  EXPECT_EQ((*again)->stat("c.txt").status().code(), StatusCode::kNotFound);
  auto refreshed = refreshLocally(*engine_, *again, spec(1), {});
  ASSERT_TRUE(refreshed.isOk()) << refreshed.status();
  EXPECT_EQ(refreshed->summary,
            "refreshed: version 2, 1 added, 1 changed, 0 removed, 9021 unchanged");
  ASSERT_EQ(refreshed->serving->waitSettled(60s).phase, Phase::kReady);
  EXPECT_EQ(*refreshed->serving->read("a.txt", 0, -1), "one, fixed");
  EXPECT_EQ(*refreshed->serving->read("many/8999", 0, -1), "8999");
}

TEST_F(RefreshTest, LocalModeLeavesAVersionNotListedWholeAsItIs) {
  EnsureSpec awaited = spec(1);
  awaited.mounts[0].source.uri += "/not-there-yet";  // listed again with backoff meanwhile
  auto first = ensureNewestVersion(*engine_, awaited);
  ASSERT_TRUE(first.isOk()) << first.status();
  auto refreshed = refreshLocally(*engine_, *first, awaited, {});
  ASSERT_TRUE(refreshed.isOk()) << refreshed.status();
  EXPECT_EQ(refreshed->serving, *first);
  EXPECT_EQ(refreshed->summary, "not refreshed: the first listing is the newest");
}

// The same against an S3-compatible store (s3rver), listed in parts at its top-level directories,
// where a change of content keeps the size and only the ETag tells it.
class S3RefreshTest : public VersionsTest {
 protected:
  static void SetUpTestSuite() { s3_.start(GRANARY_SOURCE_DIR); }
  static void TearDownTestSuite() { s3_.stop(); }
  void SetUp() override {
    if (!s3_.skip.empty()) GTEST_SKIP() << s3_.skip;
    ASSERT_NE(s3_.server, nullptr) << s3_.error;
    makeRoot("granary-s3-refresh");
    openEngine();
  }
  void put(const std::string& key, const std::string& bytes) {
    ASSERT_EQ(s3_.server->put("refresh/" + key, bytes), 200) << key;
    held_[key] = bytes;
  }
  void remove(const std::string& key) {
    ASSERT_EQ(s3_.server->remove("refresh/" + key), 204) << key;
    held_.erase(key);
  }
  EnsureSpec spec(int64_t generation) const override {
    EnsureSpec spec;
    spec.key = {"ml", "bucket", generation, "uid-2"};
    spec.mounts = {{"",
                    {.uri = "s3://data/refresh/",
                     .endpoint = s3_.server->endpoint(),
                     .accessKeyId = Secret("S3RVER"),
                     .secretAccessKey = Secret("S3RVER")}}};
    return spec;
  }

  static inline SuiteS3rver s3_;
};

TEST_F(S3RefreshTest, ANewVersionOfABucketHoldsItAsItIsNowAndTheOldOneAsItWas) {
  for (const char* dir : {"a", "b", "c", "d"})
    for (int i = 0; i < 10; ++i)
      put(std::string(dir) + "/" + std::to_string(i) + ".bin", testing::randomBytes(5000, i));
  auto first = ready(1);
  ASSERT_TRUE(first);
  const auto before = held_;
  put("a/1.bin", testing::randomBytes(5000, 99));  // the same size, another ETag
  remove("b/2.bin");
  put("c/new.bin", "new");

  auto changes = engine_->refresh(first->key(), 2, {});
  ASSERT_TRUE(changes.isOk()) << changes.status();
  EXPECT_EQ(*changes, (ManifestChanges{.added = 1,
                                       .changed = 1,
                                       .removed = 1,
                                       .unchanged = 38,
                                       .addedBytes = 3,
                                       .changedBytes = 5000}));
  // The unchanged objects are no longer in the bucket: the new version takes them from the old.
  for (const auto& [key, bytes] : before) {
    if (key != "a/1.bin" && key != "b/2.bin") {
      ASSERT_EQ(s3_.server->remove("refresh/" + key), 204) << key;
    }
  }
  auto second = ready(2);
  ASSERT_TRUE(second);
  expectReads(*second, held_);
  expectReads(*first, before);
  EXPECT_EQ(second->stat("b/2.bin").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(first->stat("c/new.bin").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace granary::cache
