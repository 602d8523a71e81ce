// Datasets through real FUSE mounts: every byte compared with the origin, directories, errors,
// concurrent readers while warming, and data-wait accounting. Needs root and /dev/fuse; skips
// with the reason otherwise.
#include "engine/mount/dataset_fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "engine/cache_metrics.h"
#include "engine/origin/http_origin.h"
#include "engine/origin/origin.h"
#include "tests/engine/test_node.h"
#include "tests/support/eventually.h"
#include "tests/support/http_file_server.h"
#include "tests/support/scratch_tree.h"

namespace granary::cache {
namespace {

using granary::testing::removeTree;

using namespace std::chrono_literals;
using testing::randomBytes;
using testing::TestNode;

std::string readWhole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class DatasetFilesystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0)
      GTEST_SKIP() << "FUSE mounts need root and /dev/fuse";
    root_ = std::filesystem::temp_directory_path() /
            ("granary-fs-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    removeTree(root_);
    origin_ = root_ / "origin";
    mountpoint_ = root_ / "mnt";
    for (int i = 0; i < 40; ++i)
      writeOrigin("train/part" + std::to_string(i % 3) + "/s" + std::to_string(i) + ".bin",
                  randomBytes(5000 + i * 131, i));
    writeOrigin("big/a.bin", randomBytes(3'000'000, 100));  // 12 chunks and a tail
    writeOrigin("labels.csv", "cat,0\ndog,1\n");
    writeOrigin("empty", "");
    node_ = std::make_unique<TestNode>(root_, "n1");
  }
  void TearDown() override {
    fs_.reset();
    cache_.reset();
    node_.reset();
    removeTree(root_);
  }

  void writeOrigin(const std::string& path, const std::string& data) {
    std::filesystem::create_directories((origin_ / path).parent_path());
    std::ofstream(origin_ / path, std::ios::binary) << data;
    files_[path] = data;
  }

  void mount(WarmMode warm) {
    auto origin = makeFileOrigin(origin_.string());
    ASSERT_TRUE(origin.isOk());
    mount(warm, std::move(*origin));
  }
  void mount(WarmMode warm, std::unique_ptr<Origin> origin) {
    std::vector<DatasetSource> sources;
    sources.push_back({"", std::move(origin)});
    DatasetSettings settings;
    settings.nodeSet = {"n1"};
    settings.chunkSize = 256 << 10;
    settings.capacityBytes = 64 << 20;
    settings.warm = warm;
    auto cache = DatasetCache::create(*node_->context, {"ml", "images", 1, "uid-1"},
                                      std::move(sources), settings);
    ASSERT_TRUE(cache.isOk()) << cache.status();
    cache_ = std::move(*cache);
    auto fs = DatasetFilesystem::mount(cache_, mountpoint_, &accounting_, mountOptions_);
    ASSERT_TRUE(fs.isOk()) << fs.status();
    fs_ = std::move(*fs);
  }

  // Mounts the dataset, never warmed, over `server` (serving the origin directory); listed.
  void mountOverHttp(granary::testing::HttpFileServer& server) {
    auto origin = makeHttpOrigin({.baseUrl = server.url(), .retryDelay = 1ms});
    ASSERT_TRUE(origin.isOk()) << origin.status();
    mount(WarmMode::kNever, std::move(*origin));
    ASSERT_EQ(cache_->waitSettled(30s).phase, Phase::kOnDemand);
  }

  // Flips one byte in every cached chunk file; returns how many.
  int damageEveryChunk() {
    int damaged = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(node_->root / "data")) {
      if (!e.is_regular_file()) continue;
      std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
      const auto at = static_cast<std::streamoff>(std::min<uintmax_t>(e.file_size() - 1, 70'000));
      f.seekg(at);
      const char c = static_cast<char>(f.get());
      f.seekp(at);
      f.put(static_cast<char>(c ^ 0x01));
      ++damaged;
    }
    return damaged;
  }

  void expectEveryFileMatches() {
    for (const auto& [path, data] : files_) {
      EXPECT_TRUE(readWhole(mountpoint_ / path) == data) << path << " differs from the origin";
    }
  }

  std::filesystem::path root_, origin_, mountpoint_;
  std::map<std::string, std::string> files_;
  std::unique_ptr<TestNode> node_;
  ReaderAccounting accounting_{nullptr};
  MountOptions mountOptions_;
  std::shared_ptr<DatasetCache> cache_;
  std::unique_ptr<DatasetFilesystem> fs_;
};

TEST_F(DatasetFilesystemTest, ServesEveryByteOfAWarmDataset) {
  mount(WarmMode::kOnCreate);
  ASSERT_EQ(cache_->waitSettled(30s).phase, Phase::kReady);
  expectEveryFileMatches();
  // Offsets across chunk boundaries, through pread.
  const int fd = ::open((mountpoint_ / "big/a.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string piece(300'000, '\0');
  ASSERT_EQ(::pread(fd, piece.data(), piece.size(), 200'000), 300'000);
  EXPECT_EQ(piece, files_["big/a.bin"].substr(200'000, 300'000));
  EXPECT_EQ(::pread(fd, piece.data(), 10, 3'000'000), 0) << "at the end";
  ::close(fd);
  const auto reads = cache_->state().reads;
  EXPECT_EQ(reads.originBytes, 0) << "warm: every byte from local disk";
}

// With passthrough, a file spanning chunks whose first chunk is not here is read by direct I/O:
// the node's bytes go straight into the reader's buffer, none into the page cache between; the
// file can still be mapped (shared), and read or mapped its bytes are the origin's.
TEST_F(DatasetFilesystemTest, AFileSpanningChunksNotHereIsReadDirectlyAndCanBeMapped) {
  mountOptions_.passthroughMinAverageFileBytes = 0;  // these files are small
  mount(WarmMode::kNever);
  EXPECT_EQ(readWhole(mountpoint_ / "labels.csv"), files_["labels.csv"]);
  if (!fs_->passesThrough()) GTEST_SKIP() << "this kernel has no FUSE passthrough (Linux 6.9+)";
  const std::string& data = files_["big/a.bin"];
  const int file = ::open((mountpoint_ / "big/a.bin").c_str(), O_RDONLY);
  ASSERT_GE(file, 0);
  std::string read(data.size(), '\0');
  for (size_t at = 0; at < read.size();) {
    const ssize_t n = ::pread(file, read.data() + at, read.size() - at, static_cast<off_t>(at));
    ASSERT_GT(n, 0);
    at += static_cast<size_t>(n);
  }
  EXPECT_TRUE(read == data);
  void* mapped = ::mmap(nullptr, data.size(), PROT_READ, MAP_SHARED, file, 0);
  ASSERT_NE(mapped, MAP_FAILED) << std::strerror(errno);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> resident((data.size() + static_cast<size_t>(page) - 1) /
                                      static_cast<size_t>(page));
  ASSERT_EQ(::mincore(mapped, data.size(), resident.data()), 0);
  EXPECT_EQ(std::count_if(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; }),
            0)
      << "the reads left pages in the page cache";
  EXPECT_TRUE(std::string_view(static_cast<const char*>(mapped), data.size()) == data);
  ::munmap(mapped, data.size());
  ::close(file);
}

// Where the kernel has FUSE passthrough, files cached whole are read by the kernel from their
// chunk files: opened through the node, read without it; files spanning chunks and files not yet
// cached are read through the node, and both kinds stay open side by side.
TEST_F(DatasetFilesystemTest, FilesCachedWholeArePassedThroughWhereTheKernelCan) {
  mountOptions_.passthroughMinAverageFileBytes = 0;  // these files are small
  mount(WarmMode::kNever);
  EXPECT_EQ(readWhole(mountpoint_ / "labels.csv"), files_["labels.csv"]) << "a miss";
  EXPECT_EQ(fs_->opensPassedThrough(), 0) << "not cached when opened";
  if (!fs_->passesThrough()) GTEST_SKIP() << "this kernel has no FUSE passthrough (Linux 6.9+)";
  ASSERT_TRUE(granary::testing::eventually([&] { return cache_->hasChunk("labels.csv", 0); }));
  EXPECT_EQ(readWhole(mountpoint_ / "labels.csv"), files_["labels.csv"]);
  EXPECT_EQ(fs_->opensPassedThrough(), 1) << "cached by the miss";
  const std::string sample = "train/part0/s0.bin";
  EXPECT_TRUE(readWhole(mountpoint_ / sample) == files_[sample]);
  ASSERT_TRUE(granary::testing::eventually([&] { return cache_->hasChunk(sample, 0); }));
  const auto readBefore = cache_->state().reads;
  const int first = ::open((mountpoint_ / sample).c_str(), O_RDONLY);
  const int second = ::open((mountpoint_ / sample).c_str(), O_RDONLY);
  const int big = ::open((mountpoint_ / "big/a.bin").c_str(), O_RDONLY);
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0) << "a second open of a file passed through shares its backing file";
  ASSERT_GE(big, 0) << "a file spanning chunks, open beside them";
  std::string piece(4000, '\0');
  ASSERT_EQ(::pread(second, piece.data(), piece.size(), 1000), 4000);
  EXPECT_EQ(piece, files_[sample].substr(1000, 4000));
  ::close(second);
  ASSERT_EQ(::pread(first, piece.data(), piece.size(), 0), 4000);
  EXPECT_EQ(piece, files_[sample].substr(0, 4000));
  ASSERT_EQ(::pread(big, piece.data(), piece.size(), 1'000'000), 4000);
  EXPECT_EQ(piece, files_["big/a.bin"].substr(1'000'000, 4000));
  ::close(first);
  ::close(big);
  EXPECT_EQ(fs_->opensPassedThrough(), 3);
  const auto reads = cache_->state().reads;
  EXPECT_GT(reads.originBytes, readBefore.originBytes) << "the big file's chunk was a miss";
  EXPECT_EQ(reads.localBytes - readBefore.localBytes,
            2 * static_cast<int64_t>(files_[sample].size()))
      << "each open passed through counts the file as read from this node's disks";
  expectEveryFileMatches();

  // Many files open at once, twice each, closed in another order, three times over: every open
  // shares its inode's backing file, and the last release of each lets it go.
  std::vector<std::string> samples;
  for (const auto& [path, data] : files_)
    if (path.starts_with("train/")) samples.push_back(path);
  std::mt19937 random(3);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::pair<std::string, int>> open;
    for (int twice = 0; twice < 2; ++twice)
      for (const auto& path : samples)
        open.emplace_back(path, ::open((mountpoint_ / path).c_str(), O_RDONLY));
    std::shuffle(open.begin(), open.end(), random);
    for (const auto& [path, fd] : open) {
      ASSERT_GE(fd, 0) << path;
      std::string whole(files_[path].size(), '\0');
      ASSERT_EQ(::pread(fd, whole.data(), whole.size(), 0), static_cast<ssize_t>(whole.size()));
      EXPECT_TRUE(whole == files_[path]) << path;
      ::close(fd);
    }
  }
}

// Files this small (77 KB on average) cost less through the page cache, which needs no request
// per open, than passed through: none is, and opens are declined so that the kernel sends no more.
TEST_F(DatasetFilesystemTest, ADatasetOfSmallFilesIsReadThroughThePageCache) {
  mount(WarmMode::kOnCreate);
  ASSERT_EQ(cache_->waitSettled(30s).phase, Phase::kReady);
  expectEveryFileMatches();
  expectEveryFileMatches();
  EXPECT_EQ(fs_->opensPassedThrough(), 0);
  EXPECT_FALSE(fs_->passesThrough());
}

TEST_F(DatasetFilesystemTest, DirectoriesAndAttributesComeFromTheManifest) {
  mount(WarmMode::kNever);
  std::set<std::string> top;
  for (const auto& e : std::filesystem::directory_iterator(mountpoint_))
    top.insert(e.path().filename().string());
  EXPECT_EQ(top, (std::set<std::string>{"big", "empty", "labels.csv", "train"}));
  int count = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(mountpoint_)) {
    if (!e.is_regular_file()) continue;
    const std::string path = std::filesystem::relative(e.path(), mountpoint_).string();
    ASSERT_TRUE(files_.contains(path)) << path;
    EXPECT_EQ(e.file_size(), files_[path].size()) << path;
    ++count;
  }
  EXPECT_EQ(count, static_cast<int>(files_.size()));
  struct stat st;
  ASSERT_EQ(::stat((mountpoint_ / "train").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ASSERT_EQ(::stat((mountpoint_ / "labels.csv").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
  EXPECT_EQ(cache_->state().reads.originBytes, 0) << "listing and stat never read data";
  // Errors a reader can act on.
  EXPECT_NE(::stat((mountpoint_ / "train/missing.bin").c_str(), &st), 0);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_LT(::open((mountpoint_ / "labels.csv").c_str(), O_WRONLY), 0);
  EXPECT_EQ(errno, EROFS);
  EXPECT_LT(::open((mountpoint_ / "new.txt").c_str(), O_CREAT | O_WRONLY, 0644), 0);
  EXPECT_EQ(errno, EROFS);
  struct statvfs vfs;
  ASSERT_EQ(::statvfs(mountpoint_.c_str(), &vfs), 0);
  EXPECT_TRUE(vfs.f_flag & ST_RDONLY);
  EXPECT_EQ(static_cast<int64_t>(vfs.f_files), static_cast<int64_t>(files_.size()));
}

// A large directory pages through the manifest, in name order, without repeats.
TEST_F(DatasetFilesystemTest, ListsALargeDirectoryCompletely) {
  for (int i = 0; i < 3000; ++i) writeOrigin("many/f" + std::to_string(i), "x");
  mount(WarmMode::kNever);
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(mountpoint_ / "many"))
    EXPECT_TRUE(names.insert(e.path().filename().string()).second) << e.path();
  EXPECT_EQ(names.size(), 3000u);
}

// Cold reads block only for the chunks they need, are counted as data wait against the reading
// process, and return the origin's bytes; many readers at once while warming runs.
TEST_F(DatasetFilesystemTest, ConcurrentColdReadsWhileWarmingAreExactAndAccounted) {
  mount(WarmMode::kOnCreate);
  std::vector<std::thread> readers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      for (const auto& [path, data] : files_) {
        if (std::hash<std::string>{}(path) % 8 == static_cast<size_t>(t) || t == 0) {
          if (readWhole(mountpoint_ / path) != data) ++wrong;
        }
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_EQ(wrong, 0);
  ASSERT_EQ(cache_->waitSettled(30s).phase, Phase::kReady);
  expectEveryFileMatches();
  const auto readers_ = accounting_.readers();
  ASSERT_FALSE(readers_.empty());
  for (const auto& r : readers_) {
    EXPECT_EQ(r.key.dataset, "ml/images");
    EXPECT_EQ(r.key.pid, ::getpid()) << "threads are counted as their process";
    EXPECT_TRUE(r.key.podUid.empty());
  }
  int64_t bytes = 0;
  for (const auto& r : readers_)
    bytes += r.reads.localBytes + r.reads.peerBytes + r.reads.originBytes;
  EXPECT_GT(bytes, 0);
}

// A reader of a file from a slow origin, timed from outside, with the kernel's read-ahead
// asking several chunks at once: its data wait is at most the time it ran, and most of it.
TEST_F(DatasetFilesystemTest, DataWaitNeverExceedsTheReadersTime) {
  auto server = granary::testing::HttpFileServer::start(origin_);
  ASSERT_TRUE(server.isOk()) << server.status();
  mountOverHttp(**server);
  (*server)->throttle(4 << 20);  // 3 MB in about 0.7 s
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(readWhole(mountpoint_ / "big/a.bin") == files_["big/a.bin"]);
  const auto ran = std::chrono::steady_clock::now() - start;
  const auto readers = accounting_.readers();
  ASSERT_EQ(readers.size(), 1u);
  std::printf("read ran %.3f s, data wait %.3f s\n", std::chrono::duration<double>(ran).count(),
              std::chrono::duration<double>(readers[0].wait).count());
  EXPECT_LE(readers[0].wait, ran);
  // Most of its time, or on a machine too busy for that, at least half of what the origin's
  // throttle alone takes to send the file.
  const auto throttled = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(static_cast<double>(files_["big/a.bin"].size()) / (4 << 20)));
  EXPECT_GE(readers[0].wait, std::min(ran / 2, throttled / 2))
      << "the reader spent most of its time waiting";
  EXPECT_GT(readers[0].reads.chunkMisses, 1) << "several reads waited, some at once";
}

TEST_F(DatasetFilesystemTest, AColdReadWaitsOnlyForItsChunkAndTheWaitIsCounted) {
  mount(WarmMode::kNever);
  EXPECT_EQ(readWhole(mountpoint_ / "labels.csv"), files_["labels.csv"]);
  auto readers = accounting_.readers();
  ASSERT_EQ(readers.size(), 1u);
  EXPECT_EQ(readers[0].reads.originBytes, static_cast<int64_t>(files_["labels.csv"].size()));
  EXPECT_GT(readers[0].wait.count(), 0);
  EXPECT_EQ(readers[0].reads.chunkMisses, 1);
  // One 4 KiB read in the middle of the big file fetches one chunk, not the file.
  const int fd = ::open((mountpoint_ / "big/a.bin").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  char buffer[4096];
  ASSERT_EQ(::pread(fd, buffer, sizeof buffer, 1'000'000), 4096);
  ::close(fd);
  EXPECT_EQ(std::string(buffer, 4096), files_["big/a.bin"].substr(1'000'000, 4096));
  // Kernel readahead may ask for a few chunks past the read, never the whole 3 MB file.
  EXPECT_LT(cache_->state().reads.originBytes, 1'500'000);
}

// One flipped byte in every cached chunk file: reads through the mount (the kernel asks at
// most 1 MiB at a time, so never a whole 256 KiB chunk from its start alone) still return the
// origin's bytes, and each damaged chunk is counted, dropped and fetched again.
TEST_F(DatasetFilesystemTest, ADamagedChunkIsNeverServed) {
  MetricsRegistry registry;
  auto metrics = CacheMetrics::create(registry);
  ASSERT_TRUE(metrics.isOk());
  node_->context->metrics = metrics->get();
  mount(WarmMode::kOnCreate);
  ASSERT_EQ(cache_->waitSettled(30s).phase, Phase::kReady);
  const int damaged = damageEveryChunk();
  ASSERT_GT(damaged, 40);
  expectEveryFileMatches();
  const std::string counted =
      "granary_cache_damaged_chunks_total{dataset=\"ml/images\"} " + std::to_string(damaged) + "\n";
  EXPECT_NE(registry.exposition().find(counted), std::string::npos) << registry.exposition();
  EXPECT_GT(cache_->state().reads.originBytes, 0) << "the damaged chunks were fetched again";
  ::sync();
  ASSERT_EQ(::system(("echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; true")), 0);
  expectEveryFileMatches();  // the fetched copies are good: nothing more is found damaged
  EXPECT_NE(registry.exposition().find(counted), std::string::npos) << registry.exposition();
}

// The same through passthrough: a chunk written since it was put is checked when its file is
// opened, and a damaged one is dropped and read through the node instead (fetched again); the
// fetched copies are passed through at the next open.
TEST_F(DatasetFilesystemTest, ADamagedChunkIsNeverPassedThrough) {
  mountOptions_.passthroughMinAverageFileBytes = 0;
  mount(WarmMode::kOnCreate);
  ASSERT_EQ(cache_->waitSettled(30s).phase, Phase::kReady);
  ASSERT_GT(damageEveryChunk(), 40);
  expectEveryFileMatches();
  if (!fs_->passesThrough()) GTEST_SKIP() << "this kernel has no FUSE passthrough (Linux 6.9+)";
  EXPECT_EQ(fs_->opensPassedThrough(), 0) << "every small file's chunk was damaged";
  EXPECT_GT(cache_->state().reads.originBytes, 0) << "the damaged chunks were fetched again";
  ::sync();
  ASSERT_EQ(::system("echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; true"), 0);
  expectEveryFileMatches();
  EXPECT_GE(fs_->opensPassedThrough(), 41) << "the fetched copies are sealed: passed through";
}

// An HTTP origin that answers ranges with whole but short bodies now and then: a reader's
// fetch retries them as warming does, and every byte read is the origin's.
TEST_F(DatasetFilesystemTest, ShortBodiesAreRetriedOnTheReadPath) {
  auto server = granary::testing::HttpFileServer::start(origin_);
  ASSERT_TRUE(server.isOk()) << server.status();
  mountOverHttp(**server);
  (*server)->shortenNext(6);
  expectEveryFileMatches();
  EXPECT_GE(cache_->state().reads.originRetries, 6);
}

// Fills `disk` with a file until no byte is left (or `bytes` are written).
void fill(const std::filesystem::path& file, int64_t bytes = INT64_MAX) {
  std::FILE* out = std::fopen(file.c_str(), "wb");
  ASSERT_NE(out, nullptr);
  const std::string block(64 << 10, 'f');
  for (int64_t written = 0; written < bytes; written += static_cast<int64_t>(block.size()))
    if (std::fwrite(block.data(), 1, block.size(), out) != block.size()) break;
  std::fclose(out);
}

int64_t freeBytes(const std::filesystem::path& disk) {
  struct statvfs fs {};
  ::statvfs(disk.c_str(), &fs);
  return static_cast<int64_t>(fs.f_bavail * fs.f_frsize);
}

// The whole state of a node (index, manifests, chunks) on a small disk that fills: the node
// says so and goes on serving from the origin, resumes caching when room returns, and starts
// again on a disk that something else filled to the last byte.
TEST_F(DatasetFilesystemTest, AFullStateDiskIsAStateNotACrash) {
  const auto disk = root_ / "state-disk";
  testing::ScopedTmpfs tmpfs(disk, "160m");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << tmpfs.error();
  for (int i = 0; i < 6; ++i)
    writeOrigin("more/f" + std::to_string(i), randomBytes(2'000'000, 200 + i));
  node_ = std::make_unique<TestNode>(disk, "n1");
  // Someone else's 70 MiB: what is left (the stores preallocate their logs) is less than the
  // chunks keep free, more than the index does.
  fill(disk / "other", 70 << 20);
  mount(WarmMode::kOnCreate);
  DatasetState state = cache_->waitSettled(30s);
  EXPECT_EQ(state.phase, Phase::kDegraded);
  EXPECT_NE(state.message.find("trying again"), std::string::npos) << state.message;
  expectEveryFileMatches();
  EXPECT_GT(freeBytes(disk), StoreGuard::kMarginBytes) << "chunks leave room for the index";
  std::filesystem::remove(disk / "other");
  // Degraded counts as settled, so the retry is waited for (up to a minute).
  granary::testing::eventually([&] { return (state = cache_->state()).phase == Phase::kReady; },
                               60s);
  EXPECT_EQ(state.phase, Phase::kReady) << state.message;
  EXPECT_EQ(state.progress.cachedFiles, static_cast<int64_t>(files_.size()));
  expectEveryFileMatches();

  fs_.reset();
  cache_.reset();
  node_.reset();
  fill(disk / "other");
  ASSERT_EQ(freeBytes(disk), 0);
  node_ = std::make_unique<TestNode>(disk, "n1");
  mount(WarmMode::kOnCreate);
  expectEveryFileMatches();
  fs_.reset();  // while the disk is still mounted
  cache_.reset();
  node_.reset();
}

// A mount made before its dataset is ready (a restarted `granaryctl mount`): readers that come
// meanwhile wait and then get every byte, never the empty directory below the mount. A pending
// mount that stops without a dataset lets its waiting readers go with an error.
TEST_F(DatasetFilesystemTest, APendingMountAnswersOnlyOnceTheDatasetIsServed) {
  auto origin = makeFileOrigin(origin_.string());
  ASSERT_TRUE(origin.isOk());
  std::vector<DatasetSource> sources;
  sources.push_back({"", std::move(*origin)});
  DatasetSettings settings;
  settings.nodeSet = {"n1"};
  settings.capacityBytes = 64 << 20;
  settings.warm = WarmMode::kNever;
  auto cache = DatasetCache::create(*node_->context, {"ml", "images", 1, "uid-1"},
                                    std::move(sources), settings);
  ASSERT_TRUE(cache.isOk()) << cache.status();
  cache_ = std::move(*cache);
  auto pending = DatasetFilesystem::mountPending("ml/images", mountpoint_, &accounting_);
  ASSERT_TRUE(pending.isOk()) << pending.status();
  fs_ = std::move(*pending);
  std::atomic<bool> done{false};
  std::string read;
  std::thread reader([&] {
    read = readWhole(mountpoint_ / "labels.csv");
    done = true;
  });
  std::this_thread::sleep_for(300ms);
  const bool waited = !done.load();
  fs_->serve(cache_);
  reader.join();
  EXPECT_TRUE(waited) << "the reader waits for the dataset";
  EXPECT_EQ(read, files_["labels.csv"]);
  expectEveryFileMatches();
  fs_.reset();

  pending = DatasetFilesystem::mountPending("ml/images", mountpoint_, &accounting_);
  ASSERT_TRUE(pending.isOk()) << pending.status();
  fs_ = std::move(*pending);
  struct stat st {};
  int statResult = 0;
  std::thread waiting([&] { statResult = ::stat((mountpoint_ / "labels.csv").c_str(), &st); });
  std::this_thread::sleep_for(200ms);
  fs_.reset();  // stops without ever serving
  waiting.join();
  EXPECT_NE(statResult, 0) << "the waiting reader is let go with an error";
}

TEST_F(DatasetFilesystemTest, StopsWhenUnmountedFromOutside) {
  mount(WarmMode::kNever);
  ASSERT_TRUE(fs_->serving());
  ASSERT_EQ(::umount2(mountpoint_.c_str(), 0), 0);
  EXPECT_TRUE(granary::testing::eventually([&] { return !fs_->serving(); }, 10s));
}

TEST(PodUidFromCgroup, FindsThePodInBothKubeletLayouts) {
  EXPECT_EQ(podUidFromCgroup("0::/kubepods/burstable/pod0f3c1a2b-1111-2222-3333-444455556666/"
                             "8d2f0c\n"),
            "0f3c1a2b-1111-2222-3333-444455556666");
  EXPECT_EQ(podUidFromCgroup("0::/kubepods.slice/kubepods-besteffort.slice/"
                             "kubepods-besteffort-pod0f3c1a2b_1111_2222_3333_444455556666.slice/"
                             "cri-containerd-abc.scope\n"),
            "0f3c1a2b-1111-2222-3333-444455556666");
  EXPECT_EQ(podUidFromCgroup("0::/user.slice/user-0.slice/session-1.scope\n"), "");
  EXPECT_EQ(podUidFromCgroup("0::/kubepods/podnot-a-uid/x\n"), "");
}

// Two threads of one process blocked over the same 2 ms: 2 ms of data wait, not 4.
TEST(ReaderAccounting, ReadsThatWaitTogetherCountOnce) {
  ReaderAccounting accounting(nullptr, [](int) { return ProcessIdentity{.pid = 7}; });
  const auto end = std::chrono::steady_clock::now();
  accounting.record("ml/a", 10, {.originBytes = 1, .wait = 2ms, .end = end});
  accounting.record("ml/a", 11, {.originBytes = 1, .wait = 2ms, .end = end});
  accounting.record("ml/a", 11, {.originBytes = 1, .wait = 3ms, .end = end + 2ms});
  const auto readers = accounting.readers();
  ASSERT_EQ(readers.size(), 1u);
  EXPECT_EQ(readers[0].wait, 4ms) << "the union of [-2, 0) and [-1, 2) ms";
  EXPECT_EQ(readers[0].reads.chunkMisses, 3);
}

TEST(ReaderAccounting, AttributesThreadsToTheirProcessOrPod) {
  ReaderAccounting accounting(nullptr, [](int tid) {
    return tid < 100
               ? ProcessIdentity{.pid = 7}
               : ProcessIdentity{.pid = tid, .podUid = "0f3c1a2b-1111-2222-3333-444455556666"};
  });
  accounting.record("ml/a", 10, {.localBytes = 5});
  accounting.record("ml/a", 11, {.originBytes = 3, .wait = 2ms});
  accounting.record("ml/a", 200, {.peerBytes = 4, .wait = 1ms});
  accounting.namePod("0f3c1a2b-1111-2222-3333-444455556666", "team", "worker-0");
  const auto readers = accounting.readers();
  ASSERT_EQ(readers.size(), 2u);
  const auto& pod = readers[0].key.podUid.empty() ? readers[1] : readers[0];
  const auto& local = readers[0].key.podUid.empty() ? readers[0] : readers[1];
  EXPECT_EQ(local.key.pid, 7);
  EXPECT_EQ(local.reads.localBytes, 5);
  EXPECT_EQ(local.reads.originBytes, 3);
  EXPECT_EQ(local.wait, 2ms);
  EXPECT_EQ(local.operations, 2);
  EXPECT_EQ(pod.podNamespace, "team");
  EXPECT_EQ(pod.podName, "worker-0");
  EXPECT_EQ(pod.reads.peerBytes, 4);
}

}  // namespace
}  // namespace granary::cache
