#include "engine/store/chunk_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

namespace granary::cache {
namespace {

class ChunkStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("granary-chunks-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(root_);
  }
  void reopen(int64_t quota = 1 << 20) {
    store_.reset();
    auto store =
        ChunkStore::open(root_ / "index", {{root_ / "nvme0", quota}, {root_ / "nvme1", quota}});
    ASSERT_TRUE(store.isOk()) << store.status();
    store_ = std::move(*store);
  }
  // The file holding a chunk (found by scanning, as an operator would).
  std::vector<std::filesystem::path> chunkFiles() const {
    std::vector<std::filesystem::path> out;
    for (const auto& dir : {root_ / "nvme0", root_ / "nvme1"}) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
        if (e.is_regular_file() && e.path().string().find("/checkpoints/") == std::string::npos)
          out.push_back(e.path());
      }
    }
    return out;
  }

  static ChunkId chunk(const std::string& path, int64_t index = 0) {
    return {"ml/ds/1", path, index};
  }

  std::filesystem::path root_;
  std::unique_ptr<ChunkStore> store_;
};

TEST_F(ChunkStoreTest, RoundTripsWholeAndPartialReads) {
  const std::string data = "0123456789abcdef";
  ASSERT_TRUE(store_->put(chunk("train/a.bin", 3), data).isOk());
  EXPECT_TRUE(store_->contains(chunk("train/a.bin", 3)));
  EXPECT_FALSE(store_->contains(chunk("train/a.bin", 4)));
  EXPECT_EQ(*store_->read(chunk("train/a.bin", 3)), data);
  EXPECT_EQ(*store_->read(chunk("train/a.bin", 3), 10, 4), "abcd");
  EXPECT_EQ(*store_->read(chunk("train/a.bin", 3), 12), "cdef");
  EXPECT_EQ(store_->read(chunk("train/b.bin")).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->remove(chunk("train/a.bin", 3)).isOk());
  EXPECT_FALSE(store_->contains(chunk("train/a.bin", 3)));
}

// A reader with its own page cache reads into its buffer past the page cache: directly where
// offset, buffer and room are aligned, the ordinary way where not; the bytes are the same
// either way, also with many reads at once.
TEST_F(ChunkStoreTest, ReadsIntoABufferReturnTheSameBytes) {
  const auto pattern = [](size_t size) {
    std::string data(size, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 % 251);
    return data;
  };
  struct Aligned {
    explicit Aligned(size_t size)
        : memory(static_cast<char*>(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096))) {}
    ~Aligned() { std::free(memory); }
    char* memory;
  };
  const auto readInto = [&](const ChunkId& id, int64_t offset, int64_t length, size_t room,
                            size_t misalign = 0) -> std::optional<std::string> {
    Aligned buffer(room + 4096);
    auto read = store_->readInto(id, offset, length, {buffer.memory + misalign, room});
    if (!read.isOk()) return std::nullopt;
    return std::string(buffer.memory + misalign, static_cast<size_t>(*read));
  };
  reopen(8 << 20);
  const std::string big = pattern((3 << 20) + 5);
  ASSERT_TRUE(store_->put(chunk("big"), big).isOk());
  EXPECT_EQ(readInto(chunk("big"), 0, -1, 4 << 20), big);  // whole: checksummed
  EXPECT_EQ(readInto(chunk("big"), 4096, 1 << 20, 1 << 20), big.substr(4096, 1 << 20));
  EXPECT_EQ(readInto(chunk("big"), 4000, 1 << 20, 1 << 20), big.substr(4000, 1 << 20));
  EXPECT_EQ(readInto(chunk("big"), 8192, 5000, 5000), big.substr(8192, 5000));     // no room
  EXPECT_EQ(readInto(chunk("big"), 8192, 5000, 8192, 1), big.substr(8192, 5000));  // unaligned
  EXPECT_EQ(readInto(chunk("big"), 3 << 20, 100, 4096), big.substr(3 << 20));      // the tail
  EXPECT_EQ(store_->readInto(chunk("big"), 0, 100, {}).status().code(),
            StatusCode::kInvalidArgument);
  const std::string data = pattern(3 * 4096 + 123);
  ASSERT_TRUE(store_->put(chunk("d"), data).isOk());
  EXPECT_EQ(readInto(chunk("d"), 0, -1, 4 * 4096), data);
  EXPECT_EQ(readInto(chunk("d"), 5000, 100, 4096), data.substr(5000, 100));
  {
    std::vector<std::jthread> readers;
    std::atomic<int> wrong{0};
    for (int t = 0; t < 24; ++t) {
      readers.emplace_back([&, t] {
        for (int i = 0; i < 20; ++i) {
          const int64_t offset = (t * 4099 + i * 4096) % (1 << 20) / 4096 * 4096;
          if (readInto(chunk("big"), offset, 200'000, 200'704) != big.substr(offset, 200'000))
            ++wrong;
        }
      });
    }
    readers.clear();
    EXPECT_EQ(wrong.load(), 0);
  }
  ASSERT_TRUE(store_->remove(chunk("big")).isOk());
  for (const auto& f : chunkFiles()) {
    std::fstream file(f, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(4096);
    file.put('!');
  }
  EXPECT_EQ(store_->readInto(chunk("d"), 0, -1, {}).status().code(), StatusCode::kInvalidArgument);
  Aligned buffer(4 * 4096);
  EXPECT_EQ(store_->readInto(chunk("d"), 0, -1, {buffer.memory, 4 * 4096}).status().code(),
            StatusCode::kCorruption);
  EXPECT_FALSE(store_->contains(chunk("d")));
}

// Chunks of one dataset directory's files share a sub-directory (their inodes stay together);
// directories fan out over hashed sub-directories.
TEST_F(ChunkStoreTest, ChunksOfADirectoryShareASubdirectoryAndDirectoriesFanOut) {
  std::set<std::string> parents;  // sub-directory names (the same in each cache directory)
  for (int d = 0; d < 50; ++d) {
    for (int f = 0; f < 3; ++f) {
      const std::string dir = d < 49 ? "d" + std::to_string(d) : "";
      const std::string path = (dir.empty() ? "" : dir + "/") + "f" + std::to_string(f);
      ASSERT_TRUE(store_->put(chunk(path), "x").isOk());
    }
  }
  const auto files = chunkFiles();
  ASSERT_EQ(files.size(), 150u);
  for (const auto& f : files) {
    EXPECT_EQ(f.extension(), ".chunk");
    EXPECT_EQ(f.parent_path().filename().string().size(), 4u);
    parents.insert(f.parent_path().filename().string());
  }
  EXPECT_EQ(parents.size(), 50u) << "one sub-directory for each dataset directory";
}

TEST_F(ChunkStoreTest, QuotasSpreadChunksAndRefuseWhatDoesNotFit) {
  reopen(1000);
  const std::string piece(600, 'p');
  ASSERT_TRUE(store_->put(chunk("a"), piece).isOk());
  ASSERT_TRUE(store_->put(chunk("b"), piece).isOk());  // the other directory has more room
  const auto usage = store_->usage();
  EXPECT_EQ(usage[0].usedBytes, 600);
  EXPECT_EQ(usage[1].usedBytes, 600);
  EXPECT_EQ(store_->put(chunk("c"), piece).code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(store_->remove(chunk("a")).isOk());
  EXPECT_TRUE(store_->put(chunk("c"), piece).isOk());
}

TEST_F(ChunkStoreTest, UsageSurvivesReopeningAndDropFreesAGeneration) {
  ASSERT_TRUE(store_->put(chunk("a"), std::string(100, 'a')).isOk());
  ASSERT_TRUE(store_->put(chunk("b"), std::string(50, 'b')).isOk());
  ASSERT_TRUE(store_->put({"ml/ds/2", "a", 0}, std::string(7, 'c')).isOk());
  reopen();
  int64_t used = 0;
  for (const auto& u : store_->usage()) used += u.usedBytes;
  EXPECT_EQ(used, 157);
  auto freed = store_->dropGeneration("ml/ds/1");
  ASSERT_TRUE(freed.isOk());
  EXPECT_EQ(*freed, 150);
  EXPECT_FALSE(store_->contains(chunk("a")));
  EXPECT_TRUE(store_->contains({"ml/ds/2", "a", 0}));
  EXPECT_EQ(chunkFiles().size(), 1u);
}

TEST_F(ChunkStoreTest, ReconcileDropsWhatCannotBeTrustedAndRemovesDebris) {
  ASSERT_TRUE(store_->put(chunk("intact"), "good data").isOk());
  ASSERT_TRUE(store_->put(chunk("missing"), "gone").isOk());
  ASSERT_TRUE(store_->put(chunk("short"), "truncated later").isOk());
  ASSERT_TRUE(store_->put(chunk("flipped"), "same size, other bytes").isOk());
  // Find each chunk's file by its content, then damage them as crashes and disks do.
  for (const auto& f : chunkFiles()) {
    std::ifstream in(f);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (text == "gone") std::filesystem::remove(f);
    if (text == "truncated later") std::filesystem::resize_file(f, 3);
    if (text == "same size, other bytes") std::ofstream(f) << "SAME SIZE, OTHER BYTES";
  }
  std::filesystem::create_directories(root_ / "nvme0" / "aa");
  std::ofstream(root_ / "nvme0" / "aa" / "orphan.chunk.tmp") << "half-written";
  std::filesystem::create_directories(root_ / "nvme1" / "bb");
  std::ofstream(root_ / "nvme1" / "bb" / "stray.chunk") << "never recorded";
  // The node's checkpoint volumes share the disk: they are not the store's to sweep.
  const auto checkpoint = root_ / "nvme0" / "checkpoints" / "0123" / "tree" / "model.pt";
  std::filesystem::create_directories(checkpoint.parent_path());
  std::ofstream(checkpoint) << "weights";

  auto report = store_->reconcile(true);
  ASSERT_TRUE(report.isOk()) << report.status();
  EXPECT_EQ(report->kept, 1);
  EXPECT_EQ(report->droppedRecords, 3);
  EXPECT_EQ(report->removedFiles, 2);
  EXPECT_EQ(*store_->read(chunk("intact")), "good data");
  for (const char* name : {"missing", "short", "flipped"})
    EXPECT_FALSE(store_->contains(chunk(name))) << name;
  EXPECT_EQ(chunkFiles().size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(checkpoint));
}

// A crash between flushes: chunks recorded after the last flush may have reached the index but
// not the disk, so reconcile re-reads exactly those, even without verifyChecksums.
TEST_F(ChunkStoreTest, ChunksWrittenAfterTheLastFlushAreReReadAfterACrash) {
  store_.reset();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // writes, flushes, writes again, then dies without closing anything
    auto store =
        ChunkStore::open(root_ / "index", {{root_ / "nvme0", 1 << 20}}, std::chrono::hours(1));
    const bool ok = store.isOk() && (*store)->put(chunk("flushed"), "early bytes").isOk() &&
                    (*store)->flush().isOk() && (*store)->put(chunk("late"), "late bytes").isOk();
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // The disk lost both chunks' bytes (same sizes, other contents).
  for (const auto& f : chunkFiles()) {
    std::ifstream in(f);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(f) << std::string(text.size(), 'X');
  }
  auto store = ChunkStore::open(root_ / "index", {{root_ / "nvme0", 1 << 20}});
  ASSERT_TRUE(store.isOk()) << store.status();
  auto report = (*store)->reconcile(false);
  ASSERT_TRUE(report.isOk()) << report.status();
  EXPECT_EQ(report->droppedRecords, 1) << "the unflushed chunk fails its checksum";
  EXPECT_FALSE((*store)->contains(chunk("late")));
  // The flushed one is trusted by size (bit rot is verifyChecksums' job), and a whole read
  // still refuses its damaged bytes.
  EXPECT_TRUE((*store)->contains(chunk("flushed")));
  EXPECT_EQ((*store)->read(chunk("flushed")).status().code(), StatusCode::kCorruption);
  // Writes continue in a newer epoch; after a flush and a clean close nothing is re-read.
  ASSERT_TRUE((*store)->put(chunk("again"), "new bytes").isOk());
  store->reset();
  auto reopened = ChunkStore::open(root_ / "index", {{root_ / "nvme0", 1 << 20}});
  ASSERT_TRUE(reopened.isOk());
  report = (*reopened)->reconcile(false);
  ASSERT_TRUE(report.isOk());
  EXPECT_EQ(report->verifiedUnflushed, 0);
  EXPECT_EQ(*(*reopened)->read(chunk("again")), "new bytes");
}

// A dataset's next version links most of its chunks from the one before: a link takes no room
// of the quota, after a restart too, and the bytes are freed with the last name.
TEST_F(ChunkStoreTest, ALinkTakesNoRoomOfTheQuota) {
  reopen(1000);
  const std::string bytes(700, 'b');
  const ChunkId next{"team/ds/2", "c", 0};
  ASSERT_TRUE(store_->put(chunk("c"), bytes).isOk());
  ASSERT_TRUE(store_->link(chunk("c"), next).isOk()) << "700 + 700 > 1000, yet one copy on disk";
  const auto used = [&] {
    int64_t total = 0;
    for (const auto& d : store_->usage()) total += d.usedBytes;
    return total;
  };
  EXPECT_EQ(used(), 700);
  reopen(1000);
  ASSERT_TRUE(store_->reconcile(false).isOk());
  EXPECT_EQ(used(), 700) << "counted once after a restart";
  ASSERT_TRUE(store_->remove(chunk("c")).isOk());
  EXPECT_EQ(used(), 700) << "the other name still holds the bytes";
  ASSERT_TRUE(store_->remove(next).isOk());
  EXPECT_EQ(used(), 0);
}

TEST_F(ChunkStoreTest, ALinkedChunkIsOneFileThatEitherNameKeepsAndADamagedByteFailsBoth) {
  const ChunkId theirs{"team/ds/1", "c", 0};
  EXPECT_EQ(store_->link(chunk("c"), theirs).code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->put(chunk("c"), "shared bytes").isOk());
  ASSERT_TRUE(store_->link(chunk("c"), theirs).isOk());
  ASSERT_EQ(chunkFiles().size(), 2u);
  EXPECT_EQ(std::filesystem::hard_link_count(chunkFiles()[0]), 2u) << "one copy on disk";
  const auto used = [&] {
    int64_t bytes = 0;
    for (const auto& d : store_->usage()) bytes += d.usedBytes;
    return bytes;
  };
  EXPECT_EQ(used(), 12) << "the quota counts the bytes once, as the disk holds them";
  // One name dropped: the other still reads, from the same bytes, which still count.
  ASSERT_TRUE(store_->remove(chunk("c")).isOk());
  EXPECT_EQ(*store_->read(theirs), "shared bytes");
  EXPECT_EQ(used(), 12);
  // Linked again, then damaged: neither name serves the flipped byte.
  ASSERT_TRUE(store_->link(theirs, chunk("c")).isOk());
  for (const auto& f : chunkFiles()) {
    std::fstream file(f, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(3);
    file.put('X');
  }
  EXPECT_EQ(store_->read(chunk("c")).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(store_->link(theirs, {"other/ds/1", "c", 0}).code(), StatusCode::kCorruption)
      << "a damaged chunk is never linked";
  EXPECT_FALSE(store_->contains({"other/ds/1", "c", 0}));
  EXPECT_FALSE(store_->contains(theirs)) << "nor kept: dropped, to be fetched again";
}

TEST_F(ChunkStoreTest, AWholeReadNeverServesDamagedBytes) {
  ASSERT_TRUE(store_->put(chunk("c"), "original").isOk());
  for (const auto& f : chunkFiles()) std::ofstream(f) << "ORIGINAL";
  auto read = store_->read(chunk("c"));
  EXPECT_EQ(read.status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(store_->contains(chunk("c"))) << "dropped, to be fetched again";
}

// Every read checks the blocks it touches, whatever its offset and length and whichever way
// it reads: one flipped byte is never served.
TEST_F(ChunkStoreTest, NoReadServesAFlippedByte) {
  std::string data(300 << 10, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 13 % 251);
  const int64_t flipped = 200'000;  // in the fourth 64 KiB block
  struct Read {
    int64_t offset, length;
    bool into;
  };
  const std::vector<Read> touching = {
      {flipped, 1, false},   {flipped - 10, 100, false},   {150000, 50001, false}, {0, -1, false},
      {196608, 65536, true}, {flipped - 5000, 4096, true}, {0, 300 << 10, true}};
  struct Aligned {
    char* memory = static_cast<char*>(std::aligned_alloc(4096, 512 << 10));
    ~Aligned() { std::free(memory); }
  } buffer;
  for (const Read& r : touching) {
    ASSERT_TRUE(store_->put(chunk("c"), data).isOk());
    const auto files = chunkFiles();
    ASSERT_EQ(files.size(), 1u);
    {
      std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(flipped);
      f.put(static_cast<char>(data[flipped] ^ 0x20));
    }
    // Bytes away from the damage are still served, and are right.
    auto before = store_->read(chunk("c"), 0, 1000);
    ASSERT_TRUE(before.isOk()) << before.status();
    EXPECT_EQ(*before, data.substr(0, 1000));
    const Status status =
        r.into
            ? store_->readInto(chunk("c"), r.offset, r.length, {buffer.memory, 512 << 10}).status()
            : store_->read(chunk("c"), r.offset, r.length).status();
    EXPECT_EQ(status.code(), StatusCode::kCorruption)
        << "offset " << r.offset << " length " << r.length << " into " << r.into;
    EXPECT_FALSE(store_->contains(chunk("c"))) << "dropped, to be fetched again";
    EXPECT_TRUE(chunkFiles().empty());
  }
}

// Readers of one damaged chunk at once: the damage is found and reported once, by the reader
// that dropped the chunk; a reader that had looked the chunk up before the drop gets a miss.
TEST_F(ChunkStoreTest, ADamagedChunkReadByManyAtOnceIsFoundOnce) {
  reopen(int64_t{64} << 20);
  constexpr int kChunks = 40, kReaders = 4;
  const std::string data(256 << 10, 'd');
  for (int i = 0; i < kChunks; ++i) ASSERT_TRUE(store_->put(chunk("c", i), data).isOk());
  for (const auto& f : chunkFiles()) {
    std::fstream file(f, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100'000);
    file.put('D');
  }
  int corrupt = 0, missed = 0;
  for (int i = 0; i < kChunks; ++i) {
    std::atomic<int> ready{0};
    std::vector<StatusCode> codes(kReaders);
    std::vector<std::thread> readers;
    for (int r = 0; r < kReaders; ++r) {
      readers.emplace_back([&, r] {
        for (ready.fetch_add(1); ready.load() < kReaders;) {
        }
        codes[r] = store_->read(chunk("c", i)).status().code();
      });
    }
    for (auto& reader : readers) reader.join();
    for (const StatusCode code : codes) {
      EXPECT_TRUE(code == StatusCode::kCorruption || code == StatusCode::kNotFound)
          << static_cast<int>(code);
      (code == StatusCode::kCorruption ? corrupt : missed) += 1;
    }
  }
  EXPECT_EQ(corrupt, kChunks) << "each damaged chunk is reported once";
  EXPECT_EQ(missed, kChunks * (kReaders - 1));
  EXPECT_TRUE(chunkFiles().empty());
}

std::string readFd(int fd) {
  std::string out(1 << 20, '\0');
  const ssize_t n = ::pread(fd, out.data(), out.size(), 0);
  out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return out;
}

// A chunk's file handed out for the kernel to read (FUSE passthrough): the file as put is handed
// out without reading it again; one written since, in place or replaced (a flipped byte, another
// size), is read whole and checked, so that damage is found before the file is handed out.
TEST_F(ChunkStoreTest, AFileHandedOutIsTheOneThatWasPutOrItIsChecked) {
  std::string data(200 << 10, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 % 253);
  ASSERT_TRUE(store_->put(chunk("c"), data).isOk());
  auto opened = store_->openVerified(chunk("c"));
  ASSERT_TRUE(opened.isOk()) << opened.status();
  EXPECT_TRUE(readFd(opened->get()) == data);

  const auto files = chunkFiles();
  ASSERT_EQ(files.size(), 1u);
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(150'000);
    f.put(static_cast<char>(data[150'000] ^ 0x04));
  }
  EXPECT_EQ(store_->openVerified(chunk("c")).status().code(), StatusCode::kCorruption);
  EXPECT_FALSE(store_->contains(chunk("c"))) << "dropped, to be fetched again";

  ASSERT_TRUE(store_->put(chunk("c"), data).isOk());
  for (const auto& f : chunkFiles()) std::ofstream(f, std::ios::app) << "more";
  EXPECT_EQ(store_->openVerified(chunk("c")).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(store_->openVerified(chunk("missing")).status().code(), StatusCode::kNotFound);
}

// A file written again with its own bytes is not sealed any more, but checked and handed out.
TEST_F(ChunkStoreTest, AFileWrittenWithTheSameBytesIsCheckedAndHandedOut) {
  const std::string data(100 << 10, 'x');
  ASSERT_TRUE(store_->put(chunk("c"), data).isOk());
  for (const auto& f : chunkFiles()) std::ofstream(f, std::ios::binary) << data;
  auto opened = store_->openVerified(chunk("c"));
  ASSERT_TRUE(opened.isOk()) << opened.status();
  EXPECT_TRUE(readFd(opened->get()) == data);
}

// Partial reads at any alignment return exactly the bytes asked for, through both paths.
TEST_F(ChunkStoreTest, PartialReadsAtAnyAlignmentReturnTheRightBytes) {
  std::string data((256 << 10) + 777, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31 % 253);
  ASSERT_TRUE(store_->put(chunk("c"), data).isOk());
  struct Aligned {
    char* memory = static_cast<char*>(std::aligned_alloc(4096, 512 << 10));
    ~Aligned() { std::free(memory); }
  } buffer;
  for (int64_t offset : {0, 1, 4096, 65535, 65536, 100'000, 262'144}) {
    for (int64_t length : {1, 4096, 65536, 131'072, 200'000}) {
      const int64_t expected = std::min<int64_t>(length, data.size() - offset);
      auto read = store_->read(chunk("c"), offset, length);
      ASSERT_TRUE(read.isOk()) << read.status();
      EXPECT_EQ(*read, data.substr(offset, expected)) << offset << "+" << length;
      // A buffer just large enough for the bytes asked for, and one with room for the blocks.
      for (size_t room : {static_cast<size_t>(expected), size_t{512} << 10}) {
        std::memset(buffer.memory, 0, 512 << 10);
        auto into = store_->readInto(chunk("c"), offset, length, {buffer.memory, room});
        ASSERT_TRUE(into.isOk()) << into.status();
        ASSERT_EQ(*into, expected);
        EXPECT_EQ(std::string(buffer.memory, expected), data.substr(offset, expected))
            << offset << "+" << length << " room " << room;
      }
    }
  }
}

TEST_F(ChunkStoreTest, ConcurrentWritersOfDifferentChunks) {
  reopen(int64_t{64} << 20);
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const std::string body(1000 + i, static_cast<char>('a' + t));
        ASSERT_TRUE(
            store_->put(chunk("w" + std::to_string(t) + "/" + std::to_string(i)), body).isOk());
      }
    });
  }
  for (auto& w : writers) w.join();
  int64_t used = 0;
  for (const auto& u : store_->usage()) used += u.usedBytes;
  EXPECT_EQ(used, 4 * (100 * 1000 + 99 * 100 / 2));
  for (int t = 0; t < 4; ++t) {
    EXPECT_EQ(*store_->read(chunk("w" + std::to_string(t) + "/42")),
              std::string(1042, static_cast<char>('a' + t)));
  }
}

TEST_F(ChunkStoreTest, RefusesBadConfiguration) {
  store_.reset();
  EXPECT_EQ(ChunkStore::open(root_ / "index", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ChunkStore::open(root_ / "index", {{root_ / "x", 0}}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace granary::cache
