#include "engine/dataset_cache.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "engine/core/placement.h"
#include "engine/origin/http_origin.h"
#include "tests/engine/test_node.h"
#include "tests/engine/test_origin.h"
#include "tests/support/eventually.h"
#include "tests/support/http_file_server.h"

namespace granary::cache {
namespace {

using namespace std::chrono_literals;
using testing::randomBytes;
using testing::RecordingOrigin;
using testing::TestNode;

// Routes peer reads to DatasetCaches in this process. A node not added is up but does not hold
// the dataset (yet): its chunks are Unavailable and its listing NotFound; a node marked down is
// Unavailable for both.
class LoopbackPeers final : public PeerReader {
 public:
  Result<std::string> readChunk(const std::string& node, const DatasetKey&, const std::string& path,
                                int64_t index, const std::string& etag, bool fill, int64_t,
                                std::stop_token, std::string) override {
    ++calls;
    DatasetCache* cache = find(node);
    if (!cache) return unavailable(node + " is down");
    GRANARY_ASSIGN_OR_RETURN(auto chunk, cache->readChunkForPeer(path, index, etag, fill));
    return *chunk;
  }
  Result<ManifestTotals> followListing(
      const std::string& node, const DatasetKey&, std::span<const KeyRange> share,
      std::stop_token stop,
      const std::function<Status(std::span<const ManifestEntry>)>& each) override {
    ++follows;
    DatasetCache* cache = find(node);
    if (!cache) {
      std::lock_guard lock(mutex_);
      if (down_.contains(node)) return unavailable(node + " is down");
      return notFound(node + " does not hold the dataset");
    }
    int sent = 0;
    return cache->shareListing(share, [&](std::span<const ManifestEntry> batch) {
      if (!batch.empty() && !share.empty() && sent++ == breakSharesAfter.load()) {
        breakSharesAfter = -1;
        return unavailable("injected: the stream broke off");
      }
      return stop.stop_requested() ? cancelled("stopping") : each(batch);
    });
  }
  // Breaks off the next share stream after it sent so many batches (-1: none).
  std::atomic<int> breakSharesAfter{-1};
  void add(const std::string& node, DatasetCache* cache) {
    std::lock_guard lock(mutex_);
    caches_[node] = cache;
  }
  void markDown(const std::string& node) {
    std::lock_guard lock(mutex_);
    caches_.erase(node);
    down_.insert(node);
  }
  std::atomic<int> calls{0};
  std::atomic<int> follows{0};

 private:
  DatasetCache* find(const std::string& node) {
    std::lock_guard lock(mutex_);
    const auto it = caches_.find(node);
    return it == caches_.end() ? nullptr : it->second;
  }
  std::mutex mutex_;
  std::map<std::string, DatasetCache*> caches_;
  std::set<std::string> down_;
};

class DatasetCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("granary-dataset-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    origin_ = root_ / "origin";
    std::filesystem::create_directories(origin_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void writeOrigin(const std::string& path, const std::string& data) {
    std::filesystem::create_directories((origin_ / path).parent_path());
    std::ofstream(origin_ / path, std::ios::binary) << data;
    files_[path] = data;
  }
  // A small tree: whole small files and multi-chunk large ones.
  void writeTree(int small = 20) {
    for (int i = 0; i < small; ++i)
      writeOrigin("train/s" + std::to_string(i) + ".bin", randomBytes(3000 + i * 7, i));
    writeOrigin("big/a.bin", randomBytes(100'000, 100));
    writeOrigin("big/b.bin", randomBytes(65'536, 101));
    writeOrigin("empty.txt", "");
  }

  // `prepare` sets up the dataset's origin before its listing starts.
  std::unique_ptr<DatasetCache> open(TestNode& node, DatasetSettings settings,
                                     RecordingOrigin** origin = nullptr,
                                     const std::function<void(RecordingOrigin&)>& prepare = {}) {
    auto file = makeFileOrigin(origin_.string());
    EXPECT_TRUE(file.isOk()) << file.status();
    auto recording = std::make_unique<RecordingOrigin>(std::move(*file));
    if (prepare) prepare(*recording);
    if (origin) *origin = recording.get();
    std::vector<DatasetSource> sources;
    sources.push_back({"", std::move(recording)});
    if (settings.nodeSet.empty()) settings.nodeSet = {node.context->nodeName};
    auto cache = DatasetCache::create(*node.context, key_, std::move(sources), settings);
    EXPECT_TRUE(cache.isOk()) << cache.status();
    return cache.isOk() ? std::move(*cache) : nullptr;
  }

  static DatasetSettings settings(int64_t chunk = 16384) {
    DatasetSettings s;
    s.chunkSize = chunk;
    s.capacityBytes = 64 << 20;
    s.warmConcurrency = 4;
    s.warmRetryDelay = 10ms;
    return s;
  }
  // Settings of a dataset that is listed but never warmed: every chunk is read on demand.
  static DatasetSettings neverWarmed() {
    DatasetSettings s = settings();
    s.warm = WarmMode::kNever;
    return s;
  }

  void expectAllFilesRead(DatasetCache& cache) {
    for (const auto& [path, data] : files_) {
      auto read = cache.read(path, 0, -1);
      ASSERT_TRUE(read.isOk()) << path << ": " << read.status();
      EXPECT_EQ(*read, data) << path;
    }
  }

  // `count` directories of `files` files each, written to the origin; their names.
  std::vector<std::string> writeDirectories(int count, int files) {
    std::vector<std::string> directories;
    for (int d = 0; d < count; ++d) {
      directories.push_back("p" + std::to_string(d) + "/");
      for (int i = 0; i < files; ++i)
        writeOrigin(directories.back() + "f" + std::to_string(i), std::string(d * 10 + i, 'x'));
    }
    return directories;
  }
  // An origin that lists in key order, split at `directories`.
  static std::function<void(RecordingOrigin&)> inKeyOrder(std::vector<std::string> directories) {
    return [directories = std::move(directories)](RecordingOrigin& origin) {
      origin.keyOrder = true;
      origin.directories = directories;
    };
  }
  // The files of the origin that `node` owns among `nodes` (one replica).
  int64_t ownedBy(const std::string& node, const std::vector<std::string>& nodes) const {
    int64_t owned = 0;
    for (const auto& [path, _] : files_) owned += owns(node, path, nodes, 1) ? 1 : 0;
    return owned;
  }

  int64_t datasetBytes() const {
    int64_t total = 0;
    for (const auto& [_, data] : files_) total += static_cast<int64_t>(data.size());
    return total;
  }

  std::filesystem::path root_;
  std::filesystem::path origin_;
  std::map<std::string, std::string> files_;
  DatasetKey key_{"ml", "imagenet", 1, "u-1"};
};

TEST_F(DatasetCacheTest, ListsWarmsAndServesEveryByteLocally) {
  writeTree();
  TestNode node(root_, "n1");
  RecordingOrigin* origin;
  auto cache = open(node, settings(), &origin);
  const DatasetState state = cache->waitSettled(20s);
  EXPECT_EQ(state.phase, Phase::kReady) << state.message;
  EXPECT_EQ(state.progress.totalFiles, static_cast<int64_t>(files_.size()));
  EXPECT_EQ(state.progress.totalBytes, datasetBytes());
  EXPECT_EQ(state.progress.ownedBytes, datasetBytes());
  EXPECT_EQ(state.progress.cachedBytes, datasetBytes());
  EXPECT_EQ(state.progress.cachedFiles, static_cast<int64_t>(files_.size()));
  EXPECT_EQ(state.progress.etaSeconds, 0);
  EXPECT_EQ(origin->bytes.load(), datasetBytes());  // each byte fetched once

  expectAllFilesRead(*cache);
  const DatasetState after = cache->state();
  EXPECT_EQ(after.reads.localBytes, datasetBytes());
  EXPECT_EQ(after.reads.originBytes, 0);
  EXPECT_EQ(after.reads.chunkMisses, 0);
  EXPECT_EQ(origin->bytes.load(), datasetBytes());
  EXPECT_EQ(after.usedBytes, datasetBytes());

  // Partial reads across chunk boundaries.
  EXPECT_EQ(*cache->read("big/a.bin", 16000, 1000), files_["big/a.bin"].substr(16000, 1000));
  EXPECT_EQ(*cache->read("big/a.bin", 99'990, 100), files_["big/a.bin"].substr(99'990));
  EXPECT_EQ(*cache->read("big/a.bin", 200'000, 10), "");
  EXPECT_EQ(cache->read("nope.bin", 0, 1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cache->read("big", 0, 1).status().code(), StatusCode::kFailedPrecondition);
  auto listing = cache->list("big", "", 10);
  ASSERT_TRUE(listing.isOk());
  ASSERT_EQ(listing->size(), 2u);
  EXPECT_EQ((*listing)[0].path, "big/a.bin");
}

// An origin that lists in key order (S3) and fails half-way, and a node restarted then: the
// listing goes on after the last path stored, never from the start, and no file is stored twice
// (the inode counter went up once per file).
TEST_F(DatasetCacheTest, AListingCutShortGoesOnWhereItEnded) {
  writeTree();
  TestNode node(root_, "n1");
  RecordingOrigin* origin;
  auto cache = open(node, neverWarmed(), &origin, [](RecordingOrigin& o) {
    o.keyOrder = true;
    o.failListAfter = 10;
  });
  ASSERT_TRUE(granary::testing::eventually([&] {
    return cache->state().message.find("listing cut short") != std::string::npos;
  })) << "the origin failed after 10 files: "
      << cache->state().message;
  cache.reset();  // the node stops before the listing is tried again

  auto again = open(node, neverWarmed(), &origin, [](RecordingOrigin& o) { o.keyOrder = true; });
  const DatasetState state = again->waitSettled(20s);
  ASSERT_EQ(state.phase, Phase::kOnDemand) << state.message;
  std::vector<std::string> paths;
  for (const auto& [path, _] : files_) paths.push_back(path);  // in key order
  EXPECT_EQ(origin->listedRanges(), (std::vector<KeyRange>{{.after = paths[9], .through = ""}}));
  EXPECT_EQ(state.progress.totalFiles, static_cast<int64_t>(files_.size()));
  EXPECT_EQ(state.progress.totalBytes, datasetBytes());
  std::set<uint64_t> inodes;
  for (const auto& path : paths) {
    const auto entry = again->stat(path);
    ASSERT_TRUE(entry.isOk()) << path << ": " << entry.status();
    inodes.insert(entry->inode);
  }
  EXPECT_EQ(inodes.size(), paths.size());
  EXPECT_EQ(*inodes.rbegin(), kRootInode + paths.size()) << "each file was numbered once";
  expectAllFilesRead(*again);
}

// An origin that lists in key order is listed in parts, cut at its top-level directories; one
// that fails half-way, and a node restarted then: each part left goes on after the last path of
// it stored, a part listed whole is not listed again, and no file is stored twice.
TEST_F(DatasetCacheTest, ThePartsOfAListingCutShortGoOnWhereEachEnded) {
  std::vector<std::string> directories;
  for (int d = 0; d < 6; ++d) {
    directories.push_back("p" + std::to_string(d) + "/");
    for (int i = 0; i < 10; ++i)
      writeOrigin(directories.back() + "f" + std::to_string(i), std::string(d * 10 + i, 'x'));
  }
  TestNode node(root_, "n1");
  node.context->listingConcurrency = 3;
  const auto prepare = [&](int failAfter) {
    return [&directories, failAfter](RecordingOrigin& o) {
      o.keyOrder = true;
      o.directories = directories;
      o.failListAfter = failAfter;
    };
  };
  RecordingOrigin* origin;
  auto cache = open(node, neverWarmed(), &origin, prepare(25));
  ASSERT_TRUE(granary::testing::eventually([&] {
    return cache->state().message.find("listing cut short") != std::string::npos;
  })) << cache->state().message;
  const std::vector<KeyRange> parts{{.after = "", .through = "p2/"},
                                    {.after = "p2/", .through = "p4/"},
                                    {.after = "p4/", .through = ""}};  // 2 directories each
  for (const KeyRange& listed : origin->listedRanges())
    EXPECT_NE(std::find(parts.begin(), parts.end(), listed), parts.end()) << listed;
  cache.reset();

  auto again = open(node, neverWarmed(), &origin, prepare(-1));
  const DatasetState state = again->waitSettled(20s);
  ASSERT_EQ(state.phase, Phase::kOnDemand) << state.message;
  const std::vector<KeyRange> resumed = origin->listedRanges();
  EXPECT_FALSE(resumed.empty());
  EXPECT_LE(resumed.size(), parts.size());
  bool wentOn = false;
  for (const KeyRange& range : resumed) {
    const auto part = std::find_if(parts.begin(), parts.end(),
                                   [&](const KeyRange& p) { return p.through == range.through; });
    ASSERT_NE(part, parts.end()) << "a part of the first listing: " << range.after;
    EXPECT_GE(range.after, part->after) << "never before where it stood";
    wentOn = wentOn || range.after != part->after;
  }
  EXPECT_TRUE(wentOn) << "25 files were stored before the failure: a part goes on after them";
  EXPECT_EQ(state.progress.totalFiles, 60);
  std::set<uint64_t> inodes;
  for (const auto& directory : directories) {
    for (int i = 0; i < 10; ++i) {
      const auto entry = again->stat(directory + "f" + std::to_string(i));
      ASSERT_TRUE(entry.isOk()) << directory << i << ": " << entry.status();
      inodes.insert(entry->inode);
    }
  }
  EXPECT_EQ(inodes.size(), 60u);
  EXPECT_EQ(*inodes.rbegin(), kRootInode + 60) << "each file was numbered once";
  expectAllFilesRead(*again);
}

// Parts are listed side by side while a remote origin is slower than the store (each object here
// takes 12 ms to come), up to listingConcurrency of them.
TEST_F(DatasetCacheTest, ASlowOriginIsListedInPartsSideBySide) {
  std::vector<std::string> directories;
  for (int d = 0; d < 6; ++d) {
    directories.push_back("p" + std::to_string(d) + "/");
    for (int i = 0; i < 10; ++i) writeOrigin(directories.back() + "f" + std::to_string(i), "x");
  }
  TestNode node(root_, "n1");
  node.context->listingConcurrency = 3;
  RecordingOrigin* origin;
  auto cache = open(node, neverWarmed(), &origin, [&](RecordingOrigin& o) {
    o.keyOrder = true;
    o.directories = directories;
    o.afterListed = [](const std::string&) { std::this_thread::sleep_for(12ms); };
  });
  const DatasetState state = cache->waitSettled(20s);
  ASSERT_EQ(state.phase, Phase::kOnDemand) << state.message;
  EXPECT_EQ(state.progress.totalFiles, 60);
  EXPECT_EQ(origin->listedRanges().size(), 3u);
  EXPECT_GE(origin->mostListingsAtOnce(), 2) << "a second lister joined the first";
  EXPECT_LE(origin->mostListingsAtOnce(), 3);
  expectAllFilesRead(*cache);
}

// A listing that takes long does not hold back what it has listed: a file listed is stat'ed
// and read at once; a path not listed yet waits for the listing (a name is absent only once it
// ended), and so does a directory's listing (the kernel keeps what readdir returns).
TEST_F(DatasetCacheTest, FilesListedAreServedBeforeTheListingEnds) {
  writeTree(3);
  TestNode node(root_, "n1");
  std::promise<std::string> firstListed;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto file = makeFileOrigin(origin_.string());
  ASSERT_TRUE(file.isOk());
  auto recording = std::make_unique<RecordingOrigin>(std::move(*file));
  int listed = 0;
  recording->afterListed = [&](const std::string& path) {
    if (++listed == 1) {
      firstListed.set_value(path);
      released.wait();
    }
  };
  std::vector<DatasetSource> sources;
  sources.push_back({"", std::move(recording)});
  DatasetSettings s = neverWarmed();
  s.nodeSet = {node.context->nodeName};
  auto cache = DatasetCache::create(*node.context, key_, std::move(sources), s);
  ASSERT_TRUE(cache.isOk()) << cache.status();
  const std::string first = firstListed.get_future().get();
  EXPECT_EQ((*cache)->state().phase, Phase::kListing);
  // The origin handed the file over; it is stored a moment later (the listing's storer thread).
  const bool stored =
      granary::testing::eventually([&] { return (*cache)->state().progress.totalFiles >= 1; }, 5s);
  auto early = std::async(std::launch::async, [&] { return (*cache)->read(first, 0, -1); });
  const bool servedEarly = stored && early.wait_for(5s) == std::future_status::ready;
  if (!servedEarly) release.set_value();  // the listing ends, and so does the test
  ASSERT_TRUE(servedEarly) << "a file listed is served while the listing goes on";
  const auto read = early.get();
  ASSERT_TRUE(read.isOk()) << read.status();
  EXPECT_EQ(*read, files_[first]);
  std::string later;
  for (const auto& [path, _] : files_)
    if (path != first) later = path;
  auto waiting = std::async(std::launch::async, [&] { return (*cache)->stat(later); });
  auto absent = std::async(std::launch::async, [&] { return (*cache)->stat("absent.bin"); });
  auto directory = std::async(std::launch::async, [&] { return (*cache)->list("", "", 100); });
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout) << "not listed yet: it waits";
  EXPECT_EQ(absent.wait_for(0ms), std::future_status::timeout);
  EXPECT_EQ(directory.wait_for(0ms), std::future_status::timeout);
  release.set_value();
  EXPECT_TRUE(waiting.get().isOk());
  EXPECT_EQ(absent.get().status().code(), StatusCode::kNotFound);
  auto entries = directory.get();
  ASSERT_TRUE(entries.isOk());
  EXPECT_EQ(entries->size(), 3u) << "train, big and empty.txt: the whole root";
}

// warm: Never is on demand, never Ready while the share is not cached: its progress is true
// (the owned share counted, nothing cached), and grows with what readers fetch.
TEST_F(DatasetCacheTest, WarmNeverFetchesOnFirstReadAndKeepsIt) {
  writeTree(3);
  TestNode node(root_, "n1");
  RecordingOrigin* origin;
  auto cache = open(node, neverWarmed(), &origin);
  const DatasetState state = cache->waitSettled(10s);
  EXPECT_EQ(state.phase, Phase::kOnDemand) << phaseName(state.phase);
  EXPECT_NE(state.message.find("Never"), std::string::npos);
  EXPECT_EQ(state.progress.ownedFiles, static_cast<int64_t>(files_.size()));
  EXPECT_EQ(state.progress.ownedBytes, datasetBytes());
  EXPECT_EQ(state.progress.cachedBytes, 0);
  EXPECT_EQ(origin->bytes.load(), 0);
  EXPECT_EQ(*cache->read("big/a.bin", 0, -1), files_["big/a.bin"]);
  EXPECT_EQ(origin->bytes.load(), 100'000);
  const DatasetState afterRead = cache->state();
  EXPECT_EQ(afterRead.phase, Phase::kOnDemand);
  EXPECT_EQ(afterRead.progress.cachedBytes, 100'000);
  EXPECT_EQ(afterRead.progress.cachedFiles, 2);  // and empty.txt, which needs no chunk
  EXPECT_EQ(*cache->read("big/a.bin", 0, -1), files_["big/a.bin"]);
  EXPECT_EQ(origin->bytes.load(), 100'000);
  EXPECT_EQ(cache->state().reads.localBytes, 100'000);
  EXPECT_EQ(cache->state().reads.originBytes, 100'000);
}

// A reader with its own buffer (a mount) gets the same bytes as readPiece: fetched on a miss,
// from the disk once cached, and fetched again when the cached chunk is damaged.
TEST_F(DatasetCacheTest, ReadsIntoACallersBuffer) {
  writeTree(1);
  TestNode node(root_, "n1");
  auto cache = open(node, neverWarmed());
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kOnDemand);
  const ManifestEntry file = *cache->stat("big/a.bin");
  const std::string& data = files_["big/a.bin"];
  std::vector<char> memory(64 << 10);
  const auto readInto = [&](int64_t offset, int64_t length) -> std::pair<std::string, Source> {
    auto piece = cache->readPieceInto(file, offset, length, memory);
    EXPECT_TRUE(piece.isOk()) << piece.status();
    if (!piece.isOk()) return {};
    return {std::string(memory.data(), static_cast<size_t>(piece->size)), piece->source};
  };
  const auto withoutFetching = [&](int64_t offset) {
    return cache->readPieceInto(file, offset, 4096, memory, /*fetch=*/false).status().code();
  };
  EXPECT_EQ(withoutFetching(100), StatusCode::kNotFound);
  EXPECT_TRUE(readInto(100, 20'000) == std::pair(data.substr(100, 16384 - 100), Source::kOrigin));
  EXPECT_EQ(withoutFetching(100), StatusCode::kOk);
  EXPECT_EQ(withoutFetching(16384), StatusCode::kNotFound);  // the second chunk is not cached
  EXPECT_TRUE(readInto(4096, 8192) == std::pair(data.substr(4096, 8192), Source::kLocal));
  EXPECT_TRUE(readInto(98'304, 4096) == std::pair(data.substr(98'304), Source::kOrigin));
  EXPECT_TRUE(readInto(100'000, 4096) == std::pair(std::string(), Source::kLocal));
  EXPECT_EQ(cache->readPieceInto(file, 0, 100'000, memory).status().code(),
            StatusCode::kInvalidArgument);  // no room
  for (const auto& e : std::filesystem::recursive_directory_iterator(node.root / "data")) {
    if (!e.is_regular_file()) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('!');
  }
  EXPECT_TRUE(readInto(0, 16384) == std::pair(data.substr(0, 16384), Source::kOrigin));
}

TEST_F(DatasetCacheTest, WarmOnJobWaitsForReaders) {
  writeTree(3);
  TestNode node(root_, "n1");
  RecordingOrigin* origin;
  auto s = settings();
  s.warm = WarmMode::kOnJob;
  auto cache = open(node, s, &origin);
  EXPECT_EQ(cache->waitSettled(10s).phase, Phase::kOnDemand);
  EXPECT_EQ(origin->bytes.load(), 0);
  cache->setWarmPlan({.hasReaders = true});
  EXPECT_EQ(cache->waitSettled(10s).phase, Phase::kReady);
  EXPECT_EQ(origin->bytes.load(), datasetBytes());
}

TEST_F(DatasetCacheTest, RestartNeitherListsNorFetchesAgain) {
  writeTree();
  TestNode node(root_, "n1");
  {
    auto cache = open(node, settings());
    ASSERT_EQ(cache->waitSettled(20s).phase, Phase::kReady);
  }
  RecordingOrigin* origin;
  auto cache = open(node, settings(), &origin);
  const DatasetState state = cache->waitSettled(20s);
  EXPECT_EQ(state.phase, Phase::kReady);
  EXPECT_EQ(state.progress.cachedBytes, datasetBytes());
  EXPECT_EQ(origin->lists.load(), 0);
  EXPECT_EQ(origin->bytes.load(), 0);
  expectAllFilesRead(*cache);
  EXPECT_EQ(origin->bytes.load(), 0);
}

TEST_F(DatasetCacheTest, FourNodesReadTheOriginOnceAndServeEachOther) {
  writeTree(40);
  std::vector<std::unique_ptr<TestNode>> nodes;
  LoopbackPeers peers;
  std::vector<std::string> names = {"n1", "n2", "n3", "n4"};
  std::vector<RecordingOrigin*> origins(4);
  std::vector<std::unique_ptr<DatasetCache>> caches;
  for (int i = 0; i < 4; ++i) {
    nodes.push_back(std::make_unique<TestNode>(root_, names[i]));
    nodes.back()->context->peers = &peers;
    auto s = settings();
    s.nodeSet = names;
    caches.push_back(open(*nodes.back(), s, &origins[i]));
    peers.add(names[i], caches.back().get());
  }
  int64_t owned = 0, originBytes = 0;
  for (int i = 0; i < 4; ++i) {
    const DatasetState state = caches[i]->waitSettled(20s);
    EXPECT_EQ(state.phase, Phase::kReady) << state.message;
    EXPECT_EQ(state.progress.cachedBytes, state.progress.ownedBytes);
    owned += state.progress.ownedBytes;
    originBytes += origins[i]->bytes.load();
  }
  EXPECT_EQ(owned, datasetBytes());  // replicas 1: the shares partition the dataset
  EXPECT_EQ(originBytes, datasetBytes());

  // Node 1 reads everything: its own files locally, the rest from their owners.
  expectAllFilesRead(*caches[0]);
  const DatasetState state = caches[0]->state();
  EXPECT_EQ(state.reads.localBytes, state.progress.ownedBytes);
  EXPECT_EQ(state.reads.peerBytes, datasetBytes() - state.progress.ownedBytes);
  EXPECT_EQ(state.reads.originBytes, 0);
  int64_t after = 0;
  for (auto* origin : origins) after += origin->bytes.load();
  EXPECT_EQ(after, datasetBytes());

  // An owner down: reads fall back to the origin, still correct.
  peers.markDown("n2");
  expectAllFilesRead(*caches[0]);
  EXPECT_GT(caches[0]->state().reads.originBytes, 0);
}

// A chunk another node keeps is read where it lies in memory: fetched once (into a buffer used
// again after it), then held for the reads after it, which neither fetch nor find it on disk;
// the next chunk is fetched ahead beside it.
TEST_F(DatasetCacheTest, AnotherNodesChunkIsReadInMemoryFetchedOnceThenHeld) {
  writeTree(4);
  for (int i = 0; i < 6; ++i)
    writeOrigin("big/x" + std::to_string(i) + ".bin", randomBytes(40'000, 200 + i));
  const std::vector<std::string> names = {"n1", "n2"};
  LoopbackPeers peers;
  HeldChunks<FetchedChunk> held(1 << 20);
  ChunkBuffers buffers(64 << 20);
  std::vector<std::unique_ptr<TestNode>> nodes;
  std::vector<std::unique_ptr<DatasetCache>> caches;
  for (const auto& name : names) {
    nodes.push_back(std::make_unique<TestNode>(root_, name));
    nodes.back()->context->peers = &peers;
    nodes.back()->context->held = &held;
    nodes.back()->context->buffers = &buffers;
    auto s = settings();
    s.nodeSet = names;
    caches.push_back(open(*nodes.back(), s));
    peers.add(name, caches.back().get());
  }
  for (auto& cache : caches) ASSERT_EQ(cache->waitSettled(20s).phase, Phase::kReady);
  std::string path;  // a file of two chunks or more that n2 keeps
  for (const auto& [name, data] : files_)
    if (data.size() > 16384 && owns("n2", name, names, 1)) path = name;
  ASSERT_FALSE(path.empty());
  const ManifestEntry file = *caches[0]->stat(path);
  const std::string& data = files_[path];
  std::vector<char> memory(16384);

  EXPECT_EQ(caches[0]->readPieceInMemory(file, 100, 4096, false).status().code(),
            StatusCode::kNotFound);
  const int callsBefore = peers.calls;
  auto fetched = caches[0]->readPieceInMemory(file, 100, 20'000, true);
  ASSERT_TRUE(fetched.isOk()) << fetched.status();
  EXPECT_EQ(std::string(fetched->data(), static_cast<size_t>(fetched->size)),
            data.substr(100, 16384 - 100));  // to the end of the chunk
  EXPECT_EQ(fetched->chunk.source, Source::kPeer);
  EXPECT_GT(peers.calls, callsBefore);
  ASSERT_TRUE(granary::testing::eventually([&] {
    return caches[0]->readPieceInMemory(file, 16384, 10, false).isOk();
  })) << "the second chunk read ahead";
  const int callsAfterFetch = peers.calls;

  auto again = caches[0]->readPieceInMemory(file, 8192, 4096, false);
  ASSERT_TRUE(again.isOk()) << again.status();
  EXPECT_EQ(std::string(again->data(), 4096), data.substr(8192, 4096));
  EXPECT_EQ(again->chunk.bytes, fetched->chunk.bytes);  // the same bytes, not a copy
  EXPECT_EQ(caches[0]->readPieceInto(file, 8192, 4096, memory, false).status().code(),
            StatusCode::kNotFound);  // held in memory, not on n1's disk
  EXPECT_EQ(peers.calls, callsAfterFetch);
  EXPECT_EQ(caches[0]->readPieceInMemory(file, static_cast<int64_t>(data.size()), 10, true)->size,
            0);  // at the end of the file
}

// One node of the set lists the origin; the others follow its listing as it goes: a file it has
// listed is served on every node before its listing ends, and the origin's index is read once.
TEST_F(DatasetCacheTest, OneNodeListsTheOriginAndTheOthersFollowItsListing) {
  writeTree(40);
  const std::vector<std::string> names = {"n1", "n2", "n3", "n4"};
  const std::string lister = ownersOf(key_.id(), names, 1).front();
  LoopbackPeers peers;
  std::promise<std::string> firstListed;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  int listed = 0;
  const auto holdAfterFirst = [&](const std::string& path) {
    if (++listed > 1) return;
    firstListed.set_value(path);
    released.wait();
  };
  std::vector<std::unique_ptr<TestNode>> nodes;
  std::vector<RecordingOrigin*> origins(4);
  std::vector<std::unique_ptr<DatasetCache>> caches;
  for (size_t i = 0; i < names.size(); ++i) {  // the lister last: the others wait for it
    nodes.push_back(std::make_unique<TestNode>(root_, names[i]));
    nodes.back()->context->peers = &peers;
    auto s = settings();
    s.nodeSet = names;
    caches.push_back(open(*nodes.back(), s, &origins[i], [&](RecordingOrigin& origin) {
      if (names[i] == lister) origin.afterListed = holdAfterFirst;
    }));
  }
  for (size_t i = 0; i < names.size(); ++i) peers.add(names[i], caches[i].get());
  const std::string first = firstListed.get_future().get();
  for (size_t i = 0; i < names.size(); ++i) {
    // A follower serves what it has taken: the lister's first file, once it has come.
    const bool taken = granary::testing::eventually(
        [&] { return caches[i]->state().progress.totalFiles >= 1; }, 5s);
    auto early = std::async(std::launch::async, [&] { return caches[i]->read(first, 0, -1); });
    const bool served = taken && early.wait_for(5s) == std::future_status::ready;
    if (!served) release.set_value();  // the listing ends, and so does the test
    ASSERT_TRUE(served) << names[i] << ": a file " << lister
                        << " listed is served while it lists: " << caches[i]->state().message;
    EXPECT_EQ(early.get().valueOr(""), files_[first]) << names[i];
    EXPECT_EQ(caches[i]->state().phase, Phase::kListing) << names[i];
  }
  release.set_value();
  int lists = 0;
  int64_t originBytes = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const DatasetState state = caches[i]->waitSettled(20s);
    EXPECT_EQ(state.phase, Phase::kReady) << names[i] << ": " << state.message;
    EXPECT_EQ(state.progress.totalFiles, static_cast<int64_t>(files_.size())) << names[i];
    EXPECT_EQ(state.progress.totalBytes, datasetBytes()) << names[i];
    EXPECT_EQ(origins[i]->lists.load(), names[i] == lister ? 1 : 0) << names[i];
    lists += origins[i]->lists.load();
    originBytes += origins[i]->bytes.load();
  }
  EXPECT_EQ(lists, 1);
  EXPECT_EQ(originBytes, datasetBytes());
  for (const auto& cache : caches) expectAllFilesRead(*cache);
}

// Each node's owned share, counted from the batches its listing stored (the lister's and its
// followers'), is the share of the files under the node set; so is the share a restarted node,
// which listed nothing, reads from its manifest.
TEST_F(DatasetCacheTest, EachNodesOwnedShareIsCountedWhetherItListedFollowedOrRestarted) {
  writeTree(60);
  const std::vector<std::string> names = {"n1", "n2", "n3"};
  LoopbackPeers peers;
  std::vector<std::unique_ptr<TestNode>> nodes;
  std::vector<std::unique_ptr<DatasetCache>> caches;
  auto s = neverWarmed();
  s.nodeSet = names;
  for (const std::string& name : names) {
    nodes.push_back(std::make_unique<TestNode>(root_, name));
    nodes.back()->context->peers = &peers;
    caches.push_back(open(*nodes.back(), s));
    peers.add(name, caches.back().get());
  }
  const auto expectShares = [&](const std::string& when) {
    for (size_t i = 0; i < names.size(); ++i) {
      int64_t files = 0, bytes = 0;
      for (const auto& [path, data] : files_) {
        if (!owns(names[i], path, names, 1)) continue;
        ++files, bytes += static_cast<int64_t>(data.size());
      }
      ASSERT_GT(files, 0) << names[i];
      const DatasetState state = caches[i]->waitSettled(20s);
      EXPECT_EQ(state.phase, Phase::kOnDemand) << when << " " << names[i] << ": " << state.message;
      EXPECT_EQ(state.progress.ownedFiles, files) << when << " " << names[i];
      EXPECT_EQ(state.progress.ownedBytes, bytes) << when << " " << names[i];
    }
  };
  expectShares("listed");
  for (size_t i = 0; i < names.size(); ++i) {
    caches[i].reset();
    caches[i] = open(*nodes[i], s);
    peers.add(names[i], caches[i].get());
  }
  expectShares("restarted");
}

// A node whose lister holds the dataset but is not listing it yet (here: it waits to try an
// origin that failed again) waits for that listing and follows it, rather than listing itself.
TEST_F(DatasetCacheTest, ANodeWaitsForAListerThatIsNotListingYet) {
  writeTree(5);
  const std::vector<std::string> names = {"a", "b"};
  const std::string lister = ownersOf(key_.id(), names, 1).front();
  const std::string other = lister == "a" ? "b" : "a";
  LoopbackPeers peers;
  TestNode listerNode(root_, lister);
  listerNode.context->peers = &peers;
  TestNode otherNode(root_, other);
  otherNode.context->peers = &peers;
  auto s = neverWarmed();
  s.nodeSet = names;
  RecordingOrigin* listerOrigin;
  RecordingOrigin* otherOrigin;
  // The lister tries again only once the other node asked to follow it while it waited.
  auto listerCache = open(listerNode, s, &listerOrigin, [&](RecordingOrigin& origin) {
    origin.failLists = 1;
    origin.beforeList = [&peers, listing = &origin] {
      if (listing->lists.load() == 2)
        granary::testing::eventually([&] { return peers.follows.load() >= 1; }, 20s);
    };
  });
  peers.add(lister, listerCache.get());
  ASSERT_TRUE(granary::testing::eventually(
      [&] { return listerCache->state().message.starts_with("waiting for the origin"); }, 5s))
      << listerCache->state().message;
  auto otherCache = open(otherNode, s, &otherOrigin);
  for (auto* cache : {listerCache.get(), otherCache.get()}) {
    const DatasetState state = cache->waitSettled(10s);
    EXPECT_EQ(state.phase, Phase::kOnDemand) << state.message;
    EXPECT_EQ(state.progress.totalFiles, static_cast<int64_t>(files_.size()));
  }
  EXPECT_EQ(listerOrigin->lists.load(), 2);  // the failed try and the listing
  EXPECT_EQ(otherOrigin->lists.load(), 0);
  EXPECT_GE(peers.follows.load(), 2);  // refused while the lister waited, then followed
  expectAllFilesRead(*otherCache);
}

// A node whose lister is down lists the origin itself, and is whole.
TEST_F(DatasetCacheTest, ANodeListsTheOriginItselfWhenTheListerIsDown) {
  writeTree(5);
  const std::vector<std::string> names = {"a", "b"};
  const std::string lister = ownersOf(key_.id(), names, 1).front();
  const std::string other = lister == "a" ? "b" : "a";
  LoopbackPeers peers;
  peers.markDown(lister);
  TestNode node(root_, other);
  node.context->peers = &peers;
  auto s = neverWarmed();
  s.nodeSet = names;
  RecordingOrigin* origin;
  auto cache = open(node, s, &origin);
  const DatasetState state = cache->waitSettled(10s);
  EXPECT_EQ(state.phase, Phase::kOnDemand) << state.message;
  EXPECT_EQ(state.progress.totalFiles, static_cast<int64_t>(files_.size()));
  EXPECT_EQ(origin->lists.load(), 1);
  EXPECT_GE(peers.follows.load(), 1);
  expectAllFilesRead(*cache);
}

// A set lists an origin that lists in key order in shares: each node lists one share of its
// parts and follows the others', so the origin is listed once, and every node holds it whole.
TEST_F(DatasetCacheTest, ASetListsTheOriginInSharesEachNodeOneAndFollowsTheRest) {
  const std::vector<std::string> directories = writeDirectories(8, 10);
  const std::vector<std::string> names = {"n1", "n2", "n3", "n4"};
  const auto shares = shareParts(splitAtDirectories(directories, 4), 4);
  ASSERT_EQ(shares.size(), 4u);
  const std::vector<std::string> listers = ownersOf(key_.id(), names, names.size());
  LoopbackPeers peers;
  std::vector<std::unique_ptr<TestNode>> nodes;
  std::vector<RecordingOrigin*> origins(names.size());
  std::vector<std::unique_ptr<DatasetCache>> caches;
  auto s = neverWarmed();
  s.nodeSet = names;
  for (size_t i = 0; i < names.size(); ++i) {
    nodes.push_back(std::make_unique<TestNode>(root_, names[i]));
    nodes.back()->context->peers = &peers;
    nodes.back()->context->listingConcurrency = 1;
    caches.push_back(open(*nodes.back(), s, &origins[i], inKeyOrder(directories)));
    peers.add(names[i], caches.back().get());
  }
  std::vector<KeyRange> listed;
  for (size_t i = 0; i < names.size(); ++i) {
    const DatasetState state = caches[i]->waitSettled(20s);
    EXPECT_EQ(state.phase, Phase::kOnDemand) << names[i] << ": " << state.message;
    EXPECT_EQ(state.progress.totalFiles, 80) << names[i];
    EXPECT_EQ(state.progress.totalBytes, datasetBytes()) << names[i];
    EXPECT_EQ(state.progress.ownedFiles, ownedBy(names[i], names)) << names[i];
    const size_t rank =
        static_cast<size_t>(std::find(listers.begin(), listers.end(), names[i]) - listers.begin());
    EXPECT_EQ(origins[i]->listedRanges(), shares[rank]) << names[i] << ": its share alone";
    for (const auto& range : origins[i]->listedRanges()) listed.push_back(range);
  }
  for (const auto& cache : caches) expectAllFilesRead(*cache);
  std::sort(listed.begin(), listed.end(),
            [](const KeyRange& a, const KeyRange& b) { return a.after < b.after; });
  EXPECT_EQ(listed, splitAtDirectories(directories, 4)) << "every part listed once in the set";
}

// Nodes whose splits of the origin differ (here: another listingConcurrency) refuse each other's
// shares at once, and each lists what it cannot follow itself: whole, and without waiting out
// the 30 s a lister that is not listing yet is given.
TEST_F(DatasetCacheTest, NodesWhoseSplitsDifferListWhatTheyCannotFollowThemselves) {
  const std::vector<std::string> directories = writeDirectories(6, 5);
  const std::vector<std::string> names = {"a", "b"};
  LoopbackPeers peers;
  auto s = neverWarmed();
  s.nodeSet = names;
  std::vector<std::unique_ptr<TestNode>> nodes;
  std::vector<std::unique_ptr<DatasetCache>> caches;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < names.size(); ++i) {
    nodes.push_back(std::make_unique<TestNode>(root_, names[i]));
    nodes.back()->context->peers = &peers;
    nodes.back()->context->listingConcurrency = i == 0 ? 1 : 3;
    caches.push_back(open(*nodes.back(), s, nullptr, inKeyOrder(directories)));
    peers.add(names[i], caches.back().get());
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const DatasetState state = caches[i]->waitSettled(20s);
    EXPECT_EQ(state.phase, Phase::kOnDemand) << names[i] << ": " << state.message;
    EXPECT_EQ(state.progress.totalFiles, 30) << names[i];
    EXPECT_EQ(state.progress.ownedFiles, ownedBy(names[i], names)) << names[i];
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  for (const auto& cache : caches) expectAllFilesRead(*cache);
}

// A share whose stream breaks off part-way ends the try: the next one starts over and lists that
// share itself, and the node is whole, with nothing of the broken stream counted twice.
TEST_F(DatasetCacheTest, AShareThatBreaksOffPartWayIsListedAgainFromTheOrigin) {
  const std::vector<std::string> directories = writeDirectories(4, 10);
  const std::vector<std::string> names = {"a", "b"};
  LoopbackPeers peers;
  peers.breakSharesAfter = 2;
  auto s = neverWarmed();
  s.nodeSet = names;
  std::vector<std::unique_ptr<TestNode>> nodes;
  std::vector<RecordingOrigin*> origins(names.size());
  std::vector<std::unique_ptr<DatasetCache>> caches;
  for (size_t i = 0; i < names.size(); ++i) {
    nodes.push_back(std::make_unique<TestNode>(root_, names[i]));
    nodes.back()->context->peers = &peers;
    nodes.back()->context->listingConcurrency = 1;
    caches.push_back(open(*nodes.back(), s, &origins[i], [&](RecordingOrigin& origin) {
      inKeyOrder(directories)(origin);
      origin.afterListed = [](const std::string&) { std::this_thread::sleep_for(5ms); };
    }));
    peers.add(names[i], caches.back().get());
  }
  size_t listedTwice = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const DatasetState state = caches[i]->waitSettled(30s);
    EXPECT_EQ(state.phase, Phase::kOnDemand) << names[i] << ": " << state.message;
    EXPECT_EQ(state.progress.totalFiles, 40) << names[i];
    EXPECT_EQ(state.progress.ownedFiles, ownedBy(names[i], names)) << names[i];
    listedTwice += origins[i]->listedRanges().size() > 1 ? 1 : 0;
  }
  EXPECT_EQ(peers.breakSharesAfter.load(), -1) << "a stream broke off";
  // The node whose stream broke off listed both shares; so may the other, whose stream of that
  // node's share ended with that node's try.
  EXPECT_GE(listedTwice, 1u);
  for (const auto& cache : caches) expectAllFilesRead(*cache);
}

// A node lists the share of a lister that is down itself, and is whole.
TEST_F(DatasetCacheTest, ANodeListsTheShareOfAListerThatIsDownItself) {
  const std::vector<std::string> directories = writeDirectories(4, 5);
  const std::vector<std::string> names = {"a", "b"};
  LoopbackPeers peers;
  peers.markDown("b");
  TestNode node(root_, "a");
  node.context->peers = &peers;
  node.context->listingConcurrency = 1;
  auto s = neverWarmed();
  s.nodeSet = names;
  RecordingOrigin* origin;
  auto cache = open(node, s, &origin, inKeyOrder(directories));
  const DatasetState state = cache->waitSettled(10s);
  EXPECT_EQ(state.phase, Phase::kOnDemand) << state.message;
  EXPECT_EQ(state.progress.totalFiles, 20);
  EXPECT_EQ(state.progress.ownedFiles, ownedBy("a", names));
  auto listed = origin->listedRanges();
  std::sort(listed.begin(), listed.end(),
            [](const KeyRange& x, const KeyRange& y) { return x.after < y.after; });
  EXPECT_EQ(listed, splitAtDirectories(directories, 2)) << "both shares, each once";
  expectAllFilesRead(*cache);
}

// A node that comes to a set whose first lister holds the version whole takes it whole from it,
// without asking the origin anything.
TEST_F(DatasetCacheTest, ANodeTakesAVersionTheFirstListerHoldsWholeFromIt) {
  const std::vector<std::string> directories = writeDirectories(4, 5);
  const std::vector<std::string> names = {"a", "b"};
  const std::string first = ownersOf(key_.id(), names, 1).front();
  const std::string late = first == "a" ? "b" : "a";
  LoopbackPeers peers;
  peers.markDown(late);
  auto s = neverWarmed();
  s.nodeSet = names;
  TestNode firstNode(root_, first);
  firstNode.context->peers = &peers;
  auto firstCache = open(firstNode, s, nullptr, inKeyOrder(directories));
  peers.add(first, firstCache.get());
  ASSERT_EQ(firstCache->waitSettled(10s).phase, Phase::kOnDemand);

  TestNode lateNode(root_, late);
  lateNode.context->peers = &peers;
  RecordingOrigin* origin;
  auto lateCache = open(lateNode, s, &origin, inKeyOrder(directories));
  const DatasetState state = lateCache->waitSettled(10s);
  EXPECT_EQ(state.phase, Phase::kOnDemand) << state.message;
  EXPECT_EQ(state.progress.totalFiles, 20);
  EXPECT_EQ(state.progress.ownedFiles, ownedBy(late, names));
  EXPECT_EQ(origin->lists.load(), 0);
  EXPECT_TRUE(origin->listedRanges().empty());
  expectAllFilesRead(*lateCache);
}

TEST_F(DatasetCacheTest, SecondReplicaFillsFromTheFirstOwner) {
  writeTree(30);
  LoopbackPeers peers;
  TestNode a(root_, "a"), b(root_, "b");
  a.context->peers = b.context->peers = &peers;
  auto s = settings();
  s.nodeSet = {"a", "b"};
  s.replicas = 2;
  s.warm = WarmMode::kOnJob;  // both reachable before either warms
  RecordingOrigin *originA, *originB;
  auto cacheA = open(a, s, &originA);
  auto cacheB = open(b, s, &originB);
  peers.add("a", cacheA.get());
  peers.add("b", cacheB.get());
  cacheA->setWarmPlan({.hasReaders = true});
  cacheB->setWarmPlan({.hasReaders = true});
  EXPECT_EQ(cacheA->waitSettled(20s).phase, Phase::kReady);
  EXPECT_EQ(cacheB->waitSettled(20s).phase, Phase::kReady);
  EXPECT_EQ(cacheA->state().progress.cachedBytes, datasetBytes());
  EXPECT_EQ(cacheB->state().progress.cachedBytes, datasetBytes());
  // Both hold everything, yet the origin gave each byte once.
  EXPECT_EQ(originA->bytes.load() + originB->bytes.load(), datasetBytes());
}

TEST_F(DatasetCacheTest, FileChangedAtTheOriginIsReportedAndNeverServed) {
  writeTree(3);
  TestNode node(root_, "n1");
  auto cache = open(node, neverWarmed());
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kOnDemand);
  writeOrigin("big/b.bin", randomBytes(65'537, 7));  // changed after listing
  auto read = cache->read("big/b.bin", 0, -1);
  EXPECT_EQ(read.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(read.status().message().find("changed"), std::string::npos);

  (void)cache->update([&] {
    auto u = neverWarmed();
    u.nodeSet = {"n1"};
    u.warm = WarmMode::kOnCreate;
    return u;
  }());
  const DatasetState state = cache->waitSettled(10s);
  EXPECT_EQ(state.phase, Phase::kDegraded);
  EXPECT_NE(state.message.find("1 files changed at the origin"), std::string::npos)
      << state.message;
}

// An origin that sends neither ETag nor Last-Modified rewrites a file (same size, new bytes)
// right after its first GET. The file is served as the one version read first, never a mix of
// chunks of both; when a chunk must be fetched again, the change is found (before and after a
// restart), the read is refused and the status names the file.
TEST_F(DatasetCacheTest, AFileWithoutVersionsIsNeverAssembledFromTwoVersions) {
  const std::string first = randomBytes(200'000, 1), second = randomBytes(200'000, 2);
  writeOrigin("shard.bin", first);
  auto server = granary::testing::HttpFileServer::start(origin_);
  ASSERT_TRUE(server.isOk()) << server.status();
  std::atomic<bool> rewriting{false}, rewritten{false};
  (*server)->withoutVersions([&](const std::string& path) {
    if (path != "shard.bin" || rewriting.exchange(true)) return;
    std::ofstream(origin_ / "shard.new", std::ios::binary) << second;
    std::filesystem::rename(origin_ / "shard.new", origin_ / path);  // one version, then the next
    rewritten = true;
  });
  const auto openOverHttp = [&](TestNode& node, DatasetSettings s) {
    auto http = makeHttpOrigin({.baseUrl = (*server)->url(), .retryDelay = 1ms});
    EXPECT_TRUE(http.isOk()) << http.status();
    std::vector<DatasetSource> sources;
    sources.push_back({"", std::move(*http)});
    s.nodeSet = {node.context->nodeName};
    return std::move(*DatasetCache::create(*node.context, key_, std::move(sources), s));
  };
  auto node = std::make_unique<TestNode>(root_, "n1");
  auto cache = openOverHttp(*node, neverWarmed());
  auto read = cache->read("shard.bin", 0, -1);
  ASSERT_TRUE(read.isOk()) << read.status();
  // The server rewrites the file once its answer is sent, which the reader may beat.
  ASSERT_TRUE(granary::testing::eventually([&] { return rewritten.load(); }, 5s));
  ASSERT_TRUE(rewritten.load());
  EXPECT_TRUE(*read == first) << "one version, the one read first, in every chunk";

  // One chunk damaged on disk must be fetched again: the origin now has other bytes.
  std::vector<std::filesystem::path> chunkFiles;
  for (const auto& e : std::filesystem::recursive_directory_iterator(node->root / "data"))
    if (e.is_regular_file()) chunkFiles.push_back(e.path());
  ASSERT_EQ(chunkFiles.size(), 13u) << "200,000 bytes in chunks of 16 KiB";
  const auto damage = [](const std::filesystem::path& file) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    char c;
    f.seekg(10);
    f.get(c);
    f.seekp(10);
    f.put(static_cast<char>(c ^ 0x55));
  };
  damage(chunkFiles[0]);
  read = cache->read("shard.bin", 0, -1);
  EXPECT_EQ(read.status().code(), StatusCode::kFailedPrecondition) << read.status();
  EXPECT_NE(read.status().message().find("changed"), std::string::npos) << read.status();
  (void)cache->update([] {
    auto u = neverWarmed();
    u.nodeSet = {"n1"};
    u.warm = WarmMode::kOnCreate;
    return u;
  }());
  DatasetState state = cache->waitSettled(10s);
  EXPECT_EQ(state.phase, Phase::kDegraded);
  EXPECT_NE(state.message.find("1 files changed at the origin"), std::string::npos)
      << state.message;
  EXPECT_NE(state.message.find("shard.bin"), std::string::npos) << state.message;

  // A new process has no memory of the first read, only the chunks on disk: still refused.
  cache.reset();
  node.reset();
  node = std::make_unique<TestNode>(root_, "n1");
  cache = openOverHttp(*node, neverWarmed());
  int refused = 0;
  for (int64_t offset = 0; offset < 200'000; offset += 16384) {
    auto piece = cache->read("shard.bin", offset, 100);
    if (!piece.isOk()) {
      EXPECT_EQ(piece.status().code(), StatusCode::kFailedPrecondition) << piece.status();
      ++refused;
      continue;
    }
    EXPECT_TRUE(*piece == first.substr(static_cast<size_t>(offset), 100)) << offset;
  }
  EXPECT_EQ(refused, 1) << "only the chunk that was damaged and dropped";
}

TEST_F(DatasetCacheTest, PinStopsAtTheQuotaAndStillServesEverything) {
  writeTree(20);
  TestNode node(root_, "n1");
  auto s = settings();
  s.capacityBytes = datasetBytes() / 2;
  RecordingOrigin* origin;
  auto cache = open(node, s, &origin);
  const DatasetState state = cache->waitSettled(20s);
  EXPECT_EQ(state.phase, Phase::kQuotaFull) << phaseName(state.phase);
  EXPECT_NE(state.message.find("quota is full"), std::string::npos) << state.message;
  EXPECT_NE(state.message.find("spec.cache.capacityPerNode"), std::string::npos) << state.message;
  EXPECT_NE(state.message.find("LRU"), std::string::npos) << state.message;
  EXPECT_LE(state.usedBytes, s.capacityBytes);
  EXPECT_GT(state.usedBytes, 0);
  EXPECT_LE(state.progress.cachedBytes, s.capacityBytes);
  EXPECT_LT(state.progress.cachedFiles, state.progress.ownedFiles);
  expectAllFilesRead(*cache);  // what did not fit comes from the origin
  EXPECT_LE(cache->state().usedBytes, s.capacityBytes);
}

// warm: Never under a Pin quota smaller than the share: reads fill the quota, then the dataset says
// QuotaFull, and every byte read is still the origin's.
TEST_F(DatasetCacheTest, OnDemandReadsFillingThePinQuotaReportQuotaFull) {
  writeTree(20);
  TestNode node(root_, "n1");
  auto s = neverWarmed();
  s.capacityBytes = datasetBytes() / 3;
  auto cache = open(node, s);
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kOnDemand);
  expectAllFilesRead(*cache);
  const DatasetState state = cache->state();
  EXPECT_EQ(state.phase, Phase::kQuotaFull) << phaseName(state.phase);
  EXPECT_NE(state.message.find("spec.cache.capacityPerNode"), std::string::npos) << state.message;
  EXPECT_GT(state.progress.cachedBytes, 0);
  EXPECT_LE(state.progress.cachedBytes, s.capacityBytes);
  expectAllFilesRead(*cache);  // again, partly from the disk
}

// Ready means every owned file is on the disk: an on-demand dataset turns Ready once reads cached
// its whole share, not before.
TEST_F(DatasetCacheTest, ReadyOnlyWhenEveryOwnedFileIsCached) {
  writeTree(3);
  TestNode node(root_, "n1");
  auto cache = open(node, neverWarmed());
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kOnDemand);
  auto last = files_.end();
  --last;
  for (auto it = files_.begin(); it != last; ++it)
    ASSERT_TRUE(cache->read(it->first, 0, -1).isOk());
  DatasetState state = cache->state();
  EXPECT_EQ(state.phase, Phase::kOnDemand) << "one file is not cached yet";
  EXPECT_LT(state.progress.cachedFiles, state.progress.ownedFiles);
  ASSERT_TRUE(cache->read(last->first, 0, -1).isOk());  // the one left
  state = cache->state();
  EXPECT_EQ(state.progress.cachedFiles, state.progress.ownedFiles);
  EXPECT_EQ(state.progress.cachedBytes, datasetBytes());
  EXPECT_EQ(state.phase, Phase::kReady) << state.message;
}

// Bytes of chunk files on a node's disk, as `du` counts them.
int64_t bytesOnDisk(const std::filesystem::path& data) {
  int64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(data))
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  return total;
}

// LRU with a quota under the dataset's size: what the node reports as cached is what is on its
// disk, within the quota, and fewer files than the dataset holds.
TEST_F(DatasetCacheTest, LruReportsWhatIsOnDiskUnderItsQuota) {
  writeTree(20);
  TestNode node(root_, "n1");
  auto s = settings();
  s.eviction = Eviction::kLru;
  s.capacityBytes = datasetBytes() / 3;
  auto cache = open(node, s);
  const DatasetState state = cache->waitSettled(20s);
  EXPECT_EQ(state.progress.cachedBytes, bytesOnDisk(node.root / "data"));
  EXPECT_LE(state.progress.cachedBytes, s.capacityBytes);
  EXPECT_GT(state.progress.cachedBytes, 0);
  EXPECT_LT(state.progress.cachedFiles, static_cast<int64_t>(files_.size()));
  EXPECT_EQ(state.progress.ownedFiles, static_cast<int64_t>(files_.size()));
  expectAllFilesRead(*cache);
  const DatasetState after = cache->state();
  EXPECT_EQ(after.progress.cachedBytes, bytesOnDisk(node.root / "data"));
  EXPECT_LE(after.progress.cachedBytes, s.capacityBytes);
}

// LRU on a disk smaller than its quota: it evicts to the disk's limit (the first one reached)
// instead of stopping with a full disk.
TEST_F(DatasetCacheTest, LruEvictsWhenTheDiskFillsBeforeTheQuota) {
  writeTree(20);
  for (int i = 0; i < 4; ++i)
    writeOrigin("big/c" + std::to_string(i), randomBytes(1 << 20, 300 + i));
  const auto disk = root_ / "small-disk";
  testing::ScopedTmpfs tmpfs(disk, "66m");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << tmpfs.error();
  {
    TestNode node(root_, "n1", 64 << 20, disk);
    auto s = settings();
    s.eviction = Eviction::kLru;
    auto cache = open(node, s);
    const DatasetState state = cache->waitSettled(20s);
    EXPECT_NE(state.phase, Phase::kDegraded) << state.message;
    EXPECT_EQ(state.progress.cachedBytes, bytesOnDisk(disk));
    EXPECT_GT(state.progress.cachedBytes, 0);
    // The chunk store keeps 64 MiB of the 66 free (for the index beside it).
    EXPECT_LE(state.progress.cachedBytes, 2 << 20);
    expectAllFilesRead(*cache);
    EXPECT_EQ(cache->state().progress.cachedBytes, bytesOnDisk(disk));
  }
}

TEST_F(DatasetCacheTest, FullDiskIsReportedAndReadsStillWork) {
  writeTree(20);
  // A real full disk: a 128 KiB tmpfs under a quota that believes it has 64 MiB.
  const auto disk = root_ / "small-disk";
  testing::ScopedTmpfs tmpfs(disk, "128k");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << tmpfs.error();
  {
    TestNode node(root_, "n1", 64 << 20, disk);
    MetricsRegistry registry;
    auto metrics = CacheMetrics::create(registry);
    ASSERT_TRUE(metrics.isOk());
    node.context->metrics = metrics->get();
    auto cache = open(node, settings());
    const DatasetState state = cache->waitSettled(20s);
    EXPECT_EQ(state.phase, Phase::kDegraded);
    EXPECT_NE(state.message.find("cache directories are full"), std::string::npos) << state.message;
    EXPECT_LT(state.progress.cachedBytes, datasetBytes());
    const std::string text = registry.exposition();
    EXPECT_NE(text.find("granary_cache_disk_full{dataset=\"ml/imagenet\"} 1\n"), std::string::npos)
        << text;
    expectAllFilesRead(*cache);  // what did not fit comes from the origin
  }
}

TEST_F(DatasetCacheTest, ConcurrentMissesOnOneChunkShareOneFetch) {
  writeOrigin("one.bin", randomBytes(16384, 3));
  TestNode node(root_, "n1");
  RecordingOrigin* origin;
  auto cache = open(node, neverWarmed(), &origin);
  std::vector<std::thread> readers;
  std::atomic<int> correct{0};
  for (int i = 0; i < 8; ++i) {
    readers.emplace_back([&] {
      auto data = cache->read("one.bin", 0, -1);
      if (data.isOk() && *data == files_["one.bin"]) ++correct;
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(correct.load(), 8);
  // Single-flight: readers that arrived while the fetch was in flight shared it; later ones
  // hit the disk. Never more than one origin read in any case here, as the chunk is kept.
  EXPECT_EQ(origin->reads().size(), 1u);
}

TEST_F(DatasetCacheTest, CorruptedChunkIsDetectedAndFetchedAgain) {
  writeOrigin("one.bin", randomBytes(10000, 4));
  TestNode node(root_, "n1");
  RecordingOrigin* origin;
  auto cache = open(node, settings(), &origin);
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kReady);
  for (const auto& e : std::filesystem::recursive_directory_iterator(node.root / "data")) {
    if (!e.is_regular_file()) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x55' ^ files_["one.bin"][100]);
  }
  EXPECT_EQ(*cache->read("one.bin", 0, -1), files_["one.bin"]);
  EXPECT_EQ(origin->bytes.load(), 20000);  // warmed once, fetched again once
  EXPECT_EQ(*cache->read("one.bin", 0, -1), files_["one.bin"]);
  EXPECT_EQ(origin->bytes.load(), 20000);
}

TEST_F(DatasetCacheTest, WarmingFollowsTheAccessOrder) {
  for (int i = 0; i < 30; ++i) writeOrigin("f" + std::to_string(i), randomBytes(1000, i));
  TestNode node(root_, "n1");
  auto s = settings();
  s.warm = WarmMode::kOnJob;
  s.warmConcurrency = 1;
  RecordingOrigin* origin;
  auto cache = open(node, s, &origin);
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kOnDemand);
  const std::vector<std::string> order = {"f29", "f3", "f17", "f8"};
  cache->setWarmPlan({.accessOrder = order, .hasReaders = true});
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kReady);
  const auto reads = origin->reads();
  ASSERT_EQ(reads.size(), 30u);
  EXPECT_EQ(std::vector<std::string>(reads.begin(), reads.begin() + 4), order);
}

// The access-order file is data of the dataset: read through the cache once listed, its paths
// warmed first in its order, after the plan's own; paths not in the manifest are named in the
// status, never a failure.
TEST_F(DatasetCacheTest, WarmingFollowsTheAccessOrderFile) {
  for (int i = 0; i < 30; ++i) writeOrigin("f" + std::to_string(i), randomBytes(1000, i));
  writeOrigin("order.txt", "# epoch 1\nf29\n\n./f3\nnope/a.bin\nf17  \nf8\n");
  TestNode node(root_, "n1");
  auto s = settings();
  s.warm = WarmMode::kOnJob;
  s.warmConcurrency = 1;
  RecordingOrigin* origin;
  auto cache = open(node, s, &origin);
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kOnDemand);
  cache->setWarmPlan({.accessOrder = {"f11"}, .accessOrderFile = "order.txt", .hasReaders = true});
  const DatasetState state = cache->waitSettled(10s);
  EXPECT_EQ(state.phase, Phase::kReady) << state.message;
  EXPECT_NE(state.message.find("1 paths of the access order are not files of the dataset"),
            std::string::npos)
      << state.message;
  EXPECT_NE(state.message.find("nope/a.bin"), std::string::npos) << state.message;
  const auto reads = origin->reads();
  ASSERT_EQ(reads.size(), 31u) << "each file once, the order file included";
  EXPECT_EQ(std::vector<std::string>(reads.begin(), reads.begin() + 6),
            (std::vector<std::string>{"order.txt", "f11", "f29", "f3", "f17", "f8"}));
  EXPECT_EQ(state.progress.cachedFiles, state.progress.ownedFiles);
}

TEST_F(DatasetCacheTest, AMissingAccessOrderFileIsReportedAndWarmingGoesOn) {
  writeTree(3);
  TestNode node(root_, "n1");
  auto s = settings();
  s.warm = WarmMode::kOnJob;
  auto cache = open(node, s);
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kOnDemand);
  cache->setWarmPlan({.accessOrderFile = "orders/missing.txt", .hasReaders = true});
  const DatasetState state = cache->waitSettled(10s);
  EXPECT_EQ(state.phase, Phase::kReady) << state.message;
  EXPECT_EQ(state.progress.cachedBytes, datasetBytes());
  EXPECT_NE(state.message.find("\"orders/missing.txt\" is not a file of the dataset"),
            std::string::npos)
      << state.message;
  EXPECT_NE(state.message.find("default order"), std::string::npos) << state.message;
}

// Two datasets warm on one node: every warm fetch of the higher priority one goes before any of
// the lower one's, whichever asked first.
TEST_F(DatasetCacheTest, AHigherPriorityDatasetWarmsFirst) {
  for (int i = 0; i < 12; ++i) writeOrigin("f" + std::to_string(i), randomBytes(40'000, i));
  TestNode node(root_, "n1");
  WarmPriorities priorities;
  node.context->priorities = &priorities;
  auto s = settings();
  s.warm = WarmMode::kOnJob;
  RecordingOrigin* lowOrigin;
  auto low = open(node, s, &lowOrigin);
  key_ = {"ml", "coco", 1, "u-2"};
  RecordingOrigin* highOrigin;
  auto high = open(node, s, &highOrigin);
  ASSERT_EQ(low->waitSettled(10s).phase, Phase::kOnDemand);
  ASSERT_EQ(high->waitSettled(10s).phase, Phase::kOnDemand);
  // Held by the test while both passes start, so that neither fetches before both take part.
  auto gate = std::make_unique<WarmPriorities::Turn>(priorities.enter(100));
  low->setWarmPlan({.hasReaders = true, .priority = 1});
  high->setWarmPlan({.hasReaders = true, .priority = 7});
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (priorities.holders() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_EQ(priorities.holders(), 3u);
  gate.reset();
  ASSERT_EQ(high->waitSettled(20s).phase, Phase::kReady);
  ASSERT_EQ(low->waitSettled(20s).phase, Phase::kReady);
  const auto highFetches = highOrigin->fetches();
  const auto lowFetches = lowOrigin->fetches();
  ASSERT_FALSE(highFetches.empty());
  ASSERT_FALSE(lowFetches.empty());
  Clock::MonoTime lastHigh{}, firstLow = lowFetches.front().start;
  for (const auto& f : highFetches) lastHigh = std::max(lastHigh, f.end);
  for (const auto& f : lowFetches) firstLow = std::min(firstLow, f.start);
  EXPECT_LE(lastHigh, firstLow) << "a priority 1 fetch started before priority 7 was done";
}

// The higher priority dataset is held back by its own bandwidth limit: the lower one warms
// meanwhile instead of waiting for its whole pass.
TEST_F(DatasetCacheTest, AHigherPriorityHeldBackByItsOwnLimitLetsALowerOneWarm) {
  for (int i = 0; i < 12; ++i) writeOrigin("f" + std::to_string(i), randomBytes(40'000, i));
  TestNode node(root_, "n1");
  WarmPriorities priorities;
  node.context->priorities = &priorities;
  auto s = settings();
  s.warm = WarmMode::kOnJob;
  auto low = open(node, s);
  key_ = {"ml", "coco", 1, "u-2"};
  s.bandwidthLimit = 160'000;  // 480 kB in about 3 s
  RecordingOrigin* highOrigin;
  auto high = open(node, s, &highOrigin);
  ASSERT_EQ(low->waitSettled(10s).phase, Phase::kOnDemand);
  ASSERT_EQ(high->waitSettled(10s).phase, Phase::kOnDemand);
  high->setWarmPlan({.hasReaders = true, .priority = 7});
  ASSERT_TRUE(granary::testing::eventually([&] { return !highOrigin->fetches().empty(); }, 10s));
  low->setWarmPlan({.hasReaders = true, .priority = 1});
  ASSERT_EQ(low->waitSettled(20s).phase, Phase::kReady);
  EXPECT_EQ(high->state().phase, Phase::kWarming)
      << "priority 1 waited for priority 7's whole pass at its own limit";
  ASSERT_EQ(high->waitSettled(20s).phase, Phase::kReady);
}

TEST_F(DatasetCacheTest, TransientOriginFailuresAreRetried) {
  writeTree(10);
  TestNode node(root_, "n1");
  RecordingOrigin* origin;
  auto s = settings();
  s.warm = WarmMode::kOnJob;
  auto cache = open(node, s, &origin);
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kOnDemand);
  origin->failNext(5);
  cache->setWarmPlan({.hasReaders = true});
  const DatasetState state = cache->waitSettled(20s);
  EXPECT_EQ(state.phase, Phase::kReady) << state.message;
  EXPECT_EQ(state.progress.cachedBytes, datasetBytes());
}

TEST_F(DatasetCacheTest, PurgeRemovesChunksAndManifest) {
  writeTree(5);
  TestNode node(root_, "n1");
  auto cache = open(node, settings());
  ASSERT_EQ(cache->waitSettled(10s).phase, Phase::kReady);
  auto freed = cache->purge();
  ASSERT_TRUE(freed.isOk()) << freed.status();
  EXPECT_EQ(*freed, datasetBytes());
  EXPECT_EQ(node.manifests->totals(key_.id()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(node.chunks->usage()[0].usedBytes, 0);
}

TEST_F(DatasetCacheTest, RefusesBadSettings) {
  writeTree(1);
  TestNode node(root_, "n1");
  auto origin = makeFileOrigin(origin_.string());
  std::vector<DatasetSource> sources;
  sources.push_back({"", std::move(*origin)});
  auto s = settings();
  s.nodeSet = {"other"};
  auto cache = DatasetCache::create(*node.context, key_, std::move(sources), s);
  ASSERT_FALSE(cache.isOk());
  EXPECT_NE(cache.status().message().find("node_set"), std::string::npos);
}

// Warming from a web origin under a bandwidth limit of 8 MiB/s, with the rate the cache reports
// sampled after every origin read.
class BandwidthLimitTest : public DatasetCacheTest {
 protected:
  static constexpr int64_t kLimit = 8 << 20, kChunk = 1 << 20;

  void SetUp() override {
    DatasetCacheTest::SetUp();
    server_ = std::move(*granary::testing::HttpFileServer::start(origin_));
  }

  DatasetSettings limited(WarmMode warm = WarmMode::kOnCreate) const {
    DatasetSettings s = settings(kChunk);
    s.warmConcurrency = 8;
    s.bandwidthLimit = kLimit;
    s.warm = warm;
    return s;
  }

  struct Sample {
    Clock::MonoTime at;
    double reported = 0;  // the cache's bytesPerSecond
  };
  // A cache over the web origin; each origin read samples the reported rate.
  std::unique_ptr<DatasetCache> openLimited(TestNode& node, DatasetSettings s) {
    auto http = makeHttpOrigin({.baseUrl = server_->url(), .retryDelay = 1ms});
    EXPECT_TRUE(http.isOk()) << http.status();
    auto recording = std::make_unique<RecordingOrigin>(std::move(*http));
    origin_reads_ = recording.get();
    samples_.clear();
    opened_ = nullptr;
    recording->afterRead = [this](const RecordingOrigin::Fetch& fetch) {
      DatasetCache* cache = opened_.load();
      if (cache == nullptr) return;  // a read before create() returned: not sampled
      const double reported = cache->state().progress.bytesPerSecond;
      std::lock_guard lock(samplesMutex_);
      // As of the end of this read, which the cache counts once it returns.
      samples_.push_back({fetch.end, reported});
    };
    std::vector<DatasetSource> sources;
    sources.push_back({"", std::move(recording)});
    s.nodeSet = {node.context->nodeName};
    opening_ = realClock().monoNow();
    auto cache = DatasetCache::create(*node.context, key_, std::move(sources), s);
    EXPECT_TRUE(cache.isOk()) << cache.status();
    opened_ = cache->get();
    return std::move(*cache);
  }

  // The most bytes in any 2 s of `events` (when, bytes), by when each began.
  static int64_t mostInTwoSeconds(const std::vector<std::pair<Clock::MonoTime, int64_t>>& events) {
    int64_t most = 0;
    for (const auto& [at, bytes] : events) {
      int64_t within = 0;
      for (const auto& [otherAt, otherBytes] : events)
        if (otherAt >= at && otherAt - at < 2s) within += otherBytes;
      most = std::max(most, within);
    }
    return most;
  }
  // The most the origin read in any 2 s, by when the reads started (a read starts once the
  // limiter let it pass).
  int64_t mostReadInTwoSeconds() const {
    std::vector<std::pair<Clock::MonoTime, int64_t>> reads;
    for (const auto& f : origin_reads_->fetches()) reads.emplace_back(f.start, f.bytes);
    return mostInTwoSeconds(reads);
  }
  // The most the web server sent in any 2 s, by when its bodies started: what crossed the wire,
  // attempts the origin's client discarded and retried included.
  int64_t mostSentInTwoSeconds() const {
    std::vector<std::pair<Clock::MonoTime, int64_t>> bodies;
    for (const auto& body : server_->sent()) bodies.emplace_back(body.at, body.bytes);
    return mostInTwoSeconds(bodies);
  }

  // What the origin delivered per second over the 5 s before `at` (or since the cache opened),
  // by when the reads ended: the rate the cache should report.
  double measuredAt(Clock::MonoTime at) const {
    const auto span = std::min<Clock::Duration>(5s, at - opening_);
    int64_t bytes = 0;
    for (const auto& f : origin_reads_->fetches())
      if (f.end < at && at - f.end < span) bytes += f.bytes;
    return static_cast<double>(bytes) / std::chrono::duration<double>(span).count();
  }

  std::vector<Sample> samples() {
    std::lock_guard lock(samplesMutex_);
    return samples_;
  }

  std::unique_ptr<granary::testing::HttpFileServer> server_;
  RecordingOrigin* origin_reads_ = nullptr;
  std::atomic<DatasetCache*> opened_{nullptr};
  Clock::MonoTime opening_{};
  std::mutex samplesMutex_;
  std::vector<Sample> samples_;
};

TEST_F(BandwidthLimitTest, TheOriginIsReadWithinTheLimitAndTheRateShownIsWhatItSent) {
  for (int i = 0; i < 10; ++i)
    writeOrigin("shard-" + std::to_string(i) + ".bin", randomBytes(4 << 20, i));  // 40 MiB
  TestNode node(root_, "n1");
  auto cache = openLimited(node, limited());
  const DatasetState state = cache->waitSettled(60s);
  ASSERT_EQ(state.phase, Phase::kReady) << state.message;
  EXPECT_EQ(server_->bytesServed(), datasetBytes()) << "each byte fetched once";

  // 2 s at the limit, plus the burst (a quarter second's worth) and a chunk or two whose reads
  // the scheduler started late.
  const int64_t bound = 2 * kLimit + kLimit / 4 + 2 * kChunk;
  EXPECT_LE(mostReadInTwoSeconds(), bound)
      << "the origin sent " << static_cast<double>(mostReadInTwoSeconds()) / (1 << 20)
      << " MiB in 2 s under " << kLimit / (1 << 20) << " MiB/s";

  int compared = 0;
  for (const auto& sample : samples()) {
    if (sample.at - opening_ < 2s) continue;  // a window of a few chunks says little
    const double measured = measuredAt(sample.at);
    EXPECT_NEAR(sample.reported, measured, 0.2 * measured)
        << "at " << (sample.at - opening_) / 1ms << " ms";
    ++compared;
  }
  EXPECT_GE(compared, 10);
  EXPECT_EQ(state.progress.etaSeconds, 0);
}

// A flapping origin: many transfers are cut short at half a chunk, and the origin's client
// retries them. Those halves crossed the wire though no read returned them, so they count against
// the limit: what the server sent, retried attempts included, stays within it.
TEST_F(BandwidthLimitTest, TheBytesOfRetriedAttemptsCountAgainstTheLimit) {
  for (int i = 0; i < 10; ++i)
    writeOrigin("shard-" + std::to_string(i) + ".bin", randomBytes(4 << 20, i));  // 40 MiB
  TestNode node(root_, "n1");
  // Ten reads' worth (every attempt of each cut short): each retry is paid for at the limit
  // before it is sent, as the read's first attempt was.
  constexpr int kTruncated = 40;
  server_->truncateNext(kTruncated);
  auto cache = openLimited(node, limited());
  const DatasetState state = cache->waitSettled(60s);
  ASSERT_EQ(state.phase, Phase::kReady) << state.message;
  expectAllFilesRead(*cache);

  int64_t sent = 0;
  for (const auto& body : server_->sent()) sent += body.bytes;
  EXPECT_EQ(sent, datasetBytes() + kTruncated * kChunk / 2) << "each truncated GET sent half";
  const int64_t bound = 2 * kLimit + kLimit / 4 + 2 * kChunk;  // as when nothing is retried
  EXPECT_LE(mostSentInTwoSeconds(), bound)
      << "the origin sent " << static_cast<double>(mostSentInTwoSeconds()) / (1 << 20)
      << " MiB in 2 s under " << kLimit / (1 << 20) << " MiB/s";
}

TEST_F(BandwidthLimitTest, ARestartCountsOnlyWhatItFetches) {
  for (int i = 0; i < 8; ++i)
    writeOrigin("shard-" + std::to_string(i) + ".bin", randomBytes(4 << 20, i));  // 32 MiB
  TestNode node(root_, "n1");
  {
    // Half of it read (and kept) by a reader before the node stops.
    auto cache = openLimited(node, limited(WarmMode::kNever));
    for (int i = 0; i < 4; ++i)
      ASSERT_TRUE(cache->read("shard-" + std::to_string(i) + ".bin", 0, -1).isOk());
  }
  const int64_t before = server_->bytesServed();
  auto cache = openLimited(node, limited());
  const DatasetState state = cache->waitSettled(60s);
  ASSERT_EQ(state.phase, Phase::kReady) << state.message;
  EXPECT_EQ(server_->bytesServed() - before, datasetBytes() / 2) << "only the other half";
  EXPECT_LE(mostReadInTwoSeconds(), 2 * kLimit + kLimit / 4 + 2 * kChunk);
  // The 16 MiB on disk are not fetched bytes: no sample reads them as a burst.
  for (const auto& sample : samples()) {
    EXPECT_LE(sample.reported, 1.5 * kLimit) << "at " << (sample.at - opening_) / 1ms << " ms";
    if (sample.at - opening_ >= 2s) {
      const double measured = measuredAt(sample.at);
      EXPECT_NEAR(sample.reported, measured, 0.2 * measured);
    }
  }

  // Warm already: nothing fetched, no rate, nothing left.
  cache.reset();
  auto warm = openLimited(node, limited());
  const DatasetState settled = warm->waitSettled(60s);
  EXPECT_EQ(settled.phase, Phase::kReady);
  EXPECT_EQ(settled.progress.bytesPerSecond, 0);
  EXPECT_EQ(settled.progress.etaSeconds, 0);
  EXPECT_EQ(server_->bytesServed() - before, datasetBytes() / 2);
}

}  // namespace
}  // namespace granary::cache
