#include "engine/warmer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "tests/engine/test_node.h"
#include "tests/engine/test_origin.h"

namespace granary::cache {
namespace {

using namespace std::chrono_literals;
using testing::randomBytes;
using testing::RecordingOrigin;
using testing::TestNode;

constexpr int64_t kChunk = 4096;

// The dataset around a Warmer: keeps what is fetched in the node's chunk store (up to
// `quotaChunks`, then the quota is full), and reports the share as the store holds it.
class TestDataset final : public ChunkKeeper, public WarmHost {
 public:
  // `originDir`: where reads through the dataset find the files.
  TestDataset(TestNode& node, std::string id, std::filesystem::path originDir)
      : node_(node), id_(std::move(id)), originDir_(std::move(originDir)) {}

  Warmer* warmer = nullptr;
  int64_t quotaChunks = -1;  // -1: no quota

  // Paths of the chunks kept, in the order they were.
  std::vector<std::string> kept() const {
    std::lock_guard lock(mutex_);
    return kept_;
  }
  int shareCounts() const {
    std::lock_guard lock(mutex_);
    return shareCounts_;
  }

  // ChunkKeeper
  std::vector<std::string> ownersOf(const std::string&) override {
    return {node_.context->nodeName};
  }
  Status keep(const ChunkId& id, const std::string& data, int64_t) override {
    bool full;
    {
      std::lock_guard lock(mutex_);
      full = quotaChunks >= 0 && static_cast<int64_t>(kept_.size()) >= quotaChunks;
      if (!full) kept_.push_back(id.path);
    }
    if (!full) return node_.chunks->put(id, data);
    warmer->capacityReached();
    return resourceExhausted("the dataset's cache quota is full");
  }
  Status keepShared(const ChunkId&, const ChunkId&, int64_t, int64_t) override {
    return unavailable("no other dataset on this test node");
  }
  bool forgetIfDamaged(const std::string&, int64_t, const Status&) override { return false; }
  void countFetched(int64_t) override {}
  void changedAtOrigin(const std::string& path) override { warmer->changedAtOrigin(path); }
  void countReaderRetry() override {}

  // WarmHost
  Result<ManifestEntry> stat(const std::string& path) override {
    return node_.manifests->stat(id_, path);
  }
  Result<std::string> read(const std::string& path, int64_t offset, int64_t length) override {
    std::ifstream in(originDir_ / path, std::ios::binary);
    if (!in) return notFound(path);
    std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return out.substr(offset, length);
  }
  void countOwnedShare(std::stop_token) override {
    std::lock_guard lock(mutex_);
    ++shareCounts_;
  }
  ShareFacts shareFacts() override {
    ShareFacts share{.capacityBytes = 64 << 20};
    std::string cursor;
    for (;;) {
      auto batch = node_.manifests->files(id_, cursor, 100);
      if (!batch.isOk() || batch->empty()) break;
      for (const auto& file : *batch) {
        ++share.ownedFiles, share.ownedBytes += file.size;
        bool whole = true;
        for (int64_t index = 0; index * kChunk < file.size; ++index)
          whole = whole && node_.chunks->contains(ChunkId{id_, file.path, index});
        if (whole) ++share.cachedFiles, share.cachedBytes += file.size;
      }
    }
    return share;
  }

 private:
  TestNode& node_;
  const std::string id_;
  const std::filesystem::path originDir_;
  mutable std::mutex mutex_;
  std::vector<std::string> kept_;
  int shareCounts_ = 0;
};

class WarmerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("granary-warmer-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "origin");
    writeOrigin("a.bin", randomBytes(3000, 1));
    writeOrigin("b.bin", randomBytes(5000, 2));
    writeOrigin("c.bin", randomBytes(3 * kChunk, 3));
    node_ = std::make_unique<TestNode>(root_, "node-a");
    dataset_ = std::make_unique<TestDataset>(*node_, key_.id(), root_ / "origin");
  }
  void TearDown() override {
    warmer_.reset();
    fetcher_.reset();
    std::filesystem::remove_all(root_);
  }

  void writeOrigin(const std::string& path, const std::string& data) {
    std::ofstream(root_ / "origin" / path, std::ios::binary) << data;
  }

  // Lists the origin into the manifest, as the dataset does before warming, and opens a warmer
  // on it (not started).
  void open(DatasetSettings settings) {
    auto file = makeFileOrigin((root_ / "origin").string());
    ASSERT_TRUE(file.isOk()) << file.status();
    auto recording = std::make_unique<RecordingOrigin>(std::move(*file));
    origin_ = recording.get();
    std::vector<DatasetSource> sources;
    sources.push_back({"", std::move(recording)});
    fetcher_ = std::make_unique<ChunkFetcher>(*node_->context, key_, std::move(sources),
                                              ChunkFetcher::Settings{.chunkSize = kChunk},
                                              *dataset_, nullptr);
    const std::string id = key_.id();
    ManifestTotals totals;
    ASSERT_TRUE(origin_
                    ->list([&](std::vector<OriginObject>&& batch) {
                      std::vector<ManifestEntry> entries;
                      for (auto& object : batch) {
                        entries.push_back({.path = object.path,
                                           .size = object.size,
                                           .etag = object.etag,
                                           .modifiedUnixNanos = object.modifiedUnixNanos,
                                           .mode = object.mode});
                        totals.files += 1, totals.bytes += object.size;
                      }
                      return node_->manifests->put(id, entries);
                    })
                    .isOk());
    ASSERT_TRUE(node_->manifests->markComplete(id, totals).isOk());
    settings.nodeSet = {"node-a"};
    settings.chunkSize = kChunk;
    warmer_ = std::make_unique<Warmer>(*node_->context, id, key_.label(), *fetcher_, *dataset_,
                                       nullptr, settings);
    dataset_->warmer = warmer_.get();
  }

  static DatasetSettings settings(WarmMode warm = WarmMode::kOnCreate) {
    DatasetSettings s;
    s.capacityBytes = 64 << 20;
    s.warm = warm;
    s.warmConcurrency = 1;  // one chunk at a time: the order is the queue's
    s.warmRetryDelay = 10ms;
    return s;
  }

  WarmStanding settle() {
    warmer_->waitSettled(30s);
    return warmer_->standing();
  }

  std::filesystem::path root_;
  DatasetKey key_{"ml", "warm", 1, "u-1"};
  std::unique_ptr<TestNode> node_;
  std::unique_ptr<TestDataset> dataset_;
  RecordingOrigin* origin_ = nullptr;
  std::unique_ptr<ChunkFetcher> fetcher_;
  std::unique_ptr<Warmer> warmer_;
};

TEST_F(WarmerTest, WarmsTheHintFirstThenTheManifestAndSettlesReady) {
  open(settings());
  warmer_->setPlan({.accessOrder = {"c.bin", "missing.bin", "b.bin"}});
  warmer_->start();
  const WarmStanding standing = settle();
  EXPECT_EQ(standing.phase, Phase::kReady) << standing.message;
  EXPECT_EQ(standing.message,
            "1 paths of the access order are not files of the dataset and were skipped "
            "(missing.bin)");
  EXPECT_EQ(dataset_->kept(),
            (std::vector<std::string>{"c.bin", "c.bin", "c.bin", "b.bin", "b.bin", "a.bin"}));
  EXPECT_GE(dataset_->shareCounts(), 1);
}

TEST_F(WarmerTest, TheAccessOrderFileIsReadThroughTheDataset) {
  writeOrigin("order.txt", "# first\nc.bin\n./a.bin\n");
  open(settings());
  warmer_->setPlan({.accessOrderFile = "order.txt"});
  warmer_->start();
  const WarmStanding standing = settle();
  EXPECT_EQ(standing.phase, Phase::kReady) << standing.message;
  EXPECT_EQ(standing.message, "");
  EXPECT_EQ(dataset_->kept(), (std::vector<std::string>{"c.bin", "c.bin", "c.bin", "a.bin", "b.bin",
                                                        "b.bin", "order.txt"}));
}

TEST_F(WarmerTest, WarmsNothingUntilAJobReadsThenWarmsOnJob) {
  open(settings(WarmMode::kOnJob));
  warmer_->setPhase(Phase::kListing, "listing the origin");
  warmer_->start();
  WarmStanding standing = settle();
  EXPECT_EQ(standing.phase, Phase::kOnDemand);
  EXPECT_EQ(standing.message,
            "warm: OnJob; no job has asked for warming yet; files are cached as they are read");
  EXPECT_TRUE(origin_->reads().empty());

  warmer_->setPlan({.hasReaders = true});
  standing = settle();
  EXPECT_EQ(standing.phase, Phase::kReady) << standing.message;
  EXPECT_EQ(dataset_->kept().size(), 6u);
}

// A change that asks for a new pass unsettles the phase as it is made: a status asked before
// the pass starts is not the last pass's Ready.
TEST_F(WarmerTest, AChangedNodeSetIsNotReadyFromTheMomentItChanges) {
  open(settings());
  warmer_->start();
  ASSERT_EQ(settle().phase, Phase::kReady);
  DatasetSettings grown = settings();
  grown.nodeSet = {"node-a", "node-b"};
  grown.chunkSize = kChunk;
  warmer_->update(grown);
  EXPECT_EQ(warmer_->standing().phase, Phase::kWarming);
  EXPECT_EQ(settle().phase, Phase::kReady);
}

TEST_F(WarmerTest, AFullQuotaEndsThePassInQuotaFull) {
  open(settings());
  dataset_->quotaChunks = 2;
  warmer_->start();
  const WarmStanding standing = settle();
  EXPECT_EQ(standing.phase, Phase::kQuotaFull) << standing.message;
  EXPECT_TRUE(standing.capacityReached);
  EXPECT_EQ(dataset_->kept().size(), 2u);
}

TEST_F(WarmerTest, FailedChunksAreRetriedByAnotherPass) {
  open(settings());
  origin_->failNext(2);
  warmer_->start();
  const WarmStanding standing = settle();
  EXPECT_EQ(standing.phase, Phase::kReady) << standing.message;
  EXPECT_EQ(origin_->reads().size(), 8u);  // 6 chunks, 2 of them twice
  EXPECT_EQ(dataset_->kept().size(), 6u);
}

TEST_F(WarmerTest, AStoppedWarmerNeitherStartsNorWaits) {
  open(settings());
  warmer_->stop();
  warmer_->start();
  warmer_->waitSettled(30s);  // returns at once: stopped
  EXPECT_EQ(warmer_->standing().phase, Phase::kPending);
  EXPECT_TRUE(origin_->reads().empty());
}

}  // namespace
}  // namespace granary::cache
