#include "engine/store/manifest_store.h"

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "engine/core/manifest_changes.h"
#include "tests/engine/test_node.h"

namespace granary::cache {
namespace {

class ManifestStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("granary-manifest-" + std::to_string(::getpid()) + "-" +
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

  static ManifestEntry file(std::string path, int64_t size) {
    ManifestEntry e;
    e.path = std::move(path);
    e.size = size;
    e.etag = "\"etag-" + std::to_string(size) + "\"";
    e.modifiedUnixNanos = 1'700'000'000'000'000'000;
    e.mode = 0444;
    return e;
  }

  // Closes the store, runs `change` on its database opened directly (every column family open,
  // handles in the order RocksDB lists the families, the default first), and opens it again.
  void changeDirectly(
      const std::function<void(rocksdb::DB&, const std::vector<rocksdb::ColumnFamilyHandle*>&)>&
          change) {
    store_.reset();
    std::vector<std::string> names;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::Options(), dir_.string(), &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> families;
    for (const std::string& name : names)
      families.emplace_back(name, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    ASSERT_TRUE(
        rocksdb::DB::Open(rocksdb::Options(), dir_.string(), families, &handles, &raw).ok());
    change(*raw, handles);
    for (auto* handle : handles) raw->DestroyColumnFamilyHandle(handle);
    delete raw;
    auto reopened = ManifestStore::open(dir_);
    ASSERT_TRUE(reopened.isOk()) << reopened.status();
    store_ = std::move(*reopened);
  }
  // What a build before the column families wrote: every key in the default family (and, with
  // `dropFamilies`, no other family).
  void moveEverythingToTheDefaultFamily(bool dropFamilies = false) {
    changeDirectly([&](rocksdb::DB& db, const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
      for (size_t family = 1; family < handles.size(); ++family) {
        std::unique_ptr<rocksdb::Iterator> it(
            db.NewIterator(rocksdb::ReadOptions(), handles[family]));
        for (it->SeekToFirst(); it->Valid(); it->Next()) {
          ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), it->key(), it->value()).ok());
          ASSERT_TRUE(db.Delete(rocksdb::WriteOptions(), handles[family], it->key()).ok());
        }
        it.reset();
        if (dropFamilies) {
          ASSERT_TRUE(db.DropColumnFamily(handles[family]).ok());
        }
      }
    });
  }

  static std::vector<std::string> names(const std::vector<ManifestEntry>& entries) {
    std::vector<std::string> out;
    for (const auto& e : entries) out.push_back(e.path);
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ManifestStore> store_;
};

TEST_F(ManifestStoreTest, StatAndListDirectChildrenWithImplicitDirectories) {
  const std::vector<ManifestEntry> files = {file("train/a/1.jpg", 10), file("train/a/2.jpg", 20),
                                            file("train/b/3.jpg", 30), file("labels.csv", 5),
                                            file("train/ab.txt", 1)};
  ASSERT_TRUE(store_->put("ml/imagenet/1", files).isOk());

  auto one = store_->stat("ml/imagenet/1", "train/a/2.jpg");
  ASSERT_TRUE(one.isOk()) << one.status();
  EXPECT_GT(one->inode, kRootInode);
  auto expected = files[1];
  expected.inode = one->inode;
  EXPECT_EQ(*one, expected);
  auto dir = store_->stat("ml/imagenet/1", "train/a");
  ASSERT_TRUE(dir.isOk());
  EXPECT_TRUE(dir->directory);
  EXPECT_TRUE(store_->stat("ml/imagenet/1", "")->directory) << "the root";
  EXPECT_EQ(store_->stat("ml/imagenet/1", "train/c").status().code(), StatusCode::kNotFound);

  EXPECT_EQ(names(*store_->list("ml/imagenet/1", "")),
            (std::vector<std::string>{"labels.csv", "train"}));
  EXPECT_EQ(names(*store_->list("ml/imagenet/1", "train")),
            (std::vector<std::string>{"train/a", "train/ab.txt", "train/b"}));
  EXPECT_EQ(names(*store_->list("ml/imagenet/1", "train/a")),
            (std::vector<std::string>{"train/a/1.jpg", "train/a/2.jpg"}));
  EXPECT_EQ(store_->list("ml/imagenet/1", "missing").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->list("ml/imagenet/1", "labels.csv").status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(ManifestStoreTest, GenerationsAreSeparateAndDropRemovesOnlyOne) {
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("x", 1)}).isOk());
  ASSERT_TRUE(store_->put("ml/ds/2", std::vector{file("y", 2)}).isOk());
  ASSERT_TRUE(store_->put("ml/ds/10", std::vector{file("z", 3)}).isOk());
  EXPECT_EQ(store_->stat("ml/ds/1", "y").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->drop("ml/ds/1").isOk());
  EXPECT_EQ(store_->stat("ml/ds/1", "x").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->stat("ml/ds/2", "y").isOk());
  EXPECT_TRUE(store_->stat("ml/ds/10", "z").isOk()) << "a generation sharing a prefix survives";
}

TEST_F(ManifestStoreTest, PagesThroughALargeDirectory) {
  std::vector<ManifestEntry> files;
  for (int i = 0; i < 100000; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "shard-%02d/img-%06d.jpg", i % 10, i);
    files.push_back(file(name, i));
  }
  ASSERT_TRUE(store_->put("ml/big/1", files).isOk());
  size_t seen = 0;
  std::string after;
  std::string previous;
  while (true) {
    auto page = store_->list("ml/big/1", "shard-03", after, 1000);
    ASSERT_TRUE(page.isOk()) << page.status();
    if (page->empty()) break;
    for (const auto& e : *page) {
      ASSERT_LT(previous, e.path) << "name order, no repeats";
      previous = e.path;
    }
    seen += page->size();
    after = page->back().path.substr(std::string("shard-03/").size());
  }
  EXPECT_EQ(seen, 10000u);
}

TEST_F(ManifestStoreTest, SurvivesReopening) {
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("keep/me.bin", 42)}).isOk());
  store_.reset();
  auto reopened = ManifestStore::open(dir_);
  ASSERT_TRUE(reopened.isOk()) << reopened.status();
  EXPECT_EQ((*reopened)->stat("ml/ds/1", "keep/me.bin")->size, 42);
}

// Inodes are unique, found again by number, kept when a directory reappears in a later batch,
// the same after reopening (a restarted node answers for inodes the kernel kept), and dropped
// with their generation.
TEST_F(ManifestStoreTest, InodesAreStableAndUnique) {
  std::vector<ManifestEntry> first, second;
  for (int i = 0; i < 2000; ++i)
    (i < 1000 ? first : second)
        .push_back(file("d" + std::to_string(i % 7) + "/f" + std::to_string(i), i));
  ASSERT_TRUE(store_->put("ml/ds/1", first).isOk());
  ASSERT_TRUE(store_->put("ml/ds/1", second).isOk());
  std::map<uint64_t, std::string> byInode;
  for (const auto& dir : {"", "d0", "d1", "d2", "d3", "d4", "d5", "d6"}) {
    auto listed = store_->list("ml/ds/1", dir, "", 10000);
    ASSERT_TRUE(listed.isOk()) << listed.status();
    for (const auto& entry : *listed) {
      EXPECT_TRUE(byInode.emplace(entry.inode, entry.path).second) << entry.path;
      auto again = store_->statInode("ml/ds/1", entry.inode);
      ASSERT_TRUE(again.isOk()) << again.status();
      EXPECT_EQ(*again, entry);
    }
  }
  EXPECT_EQ(byInode.size(), 2007u);
  EXPECT_EQ(store_->statInode("ml/ds/1", kRootInode)->directory, true);
  const uint64_t d3 = store_->stat("ml/ds/1", "d3")->inode;
  store_.reset();
  auto reopened = ManifestStore::open(dir_);
  ASSERT_TRUE(reopened.isOk());
  EXPECT_EQ((*reopened)->stat("ml/ds/1", "d3")->inode, d3);
  EXPECT_EQ((*reopened)->statInode("ml/ds/1", d3)->path, "d3");
  EXPECT_EQ((*reopened)->statInode("ml/ds/1", 12345).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE((*reopened)->drop("ml/ds/1").isOk());
  EXPECT_EQ((*reopened)->statInode("ml/ds/1", d3).status().code(), StatusCode::kNotFound);
}

// Files are numbered in listing order, directories apart from them; the counter is stored, so a
// reopened store goes on from it, and it outlives drop: a generation listed again never gives a
// number a kernel may still hold to another path.
TEST_F(ManifestStoreTest, FileInodesCountOnAndAreNeverGivenTwice) {
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("a/x", 1), file("a/y", 2)}).isOk());
  EXPECT_EQ(store_->stat("ml/ds/1", "a/x")->inode, kRootInode + 1);
  EXPECT_EQ(store_->stat("ml/ds/1", "a/y")->inode, kRootInode + 2);
  const uint64_t a = store_->stat("ml/ds/1", "a")->inode;
  EXPECT_GE(a, kDirectoryInodes);
  ASSERT_TRUE(store_->put("ml/ds/2", std::vector{file("z", 1)}).isOk());
  EXPECT_EQ(store_->stat("ml/ds/2", "z")->inode, kRootInode + 1) << "each generation counts";

  store_.reset();
  auto reopened = ManifestStore::open(dir_);
  ASSERT_TRUE(reopened.isOk()) << reopened.status();
  store_ = std::move(*reopened);
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("a/z", 3)}).isOk());
  EXPECT_EQ(store_->stat("ml/ds/1", "a/z")->inode, kRootInode + 3);
  EXPECT_EQ(store_->stat("ml/ds/1", "a")->inode, a) << "a stored directory keeps its inode";

  ASSERT_TRUE(store_->drop("ml/ds/1").isOk());
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("a/y", 2)}).isOk());
  EXPECT_EQ(store_->stat("ml/ds/1", "a/y")->inode, kRootInode + 4);
  EXPECT_EQ(store_->statInode("ml/ds/1", kRootInode + 4)->path, "a/y");
  for (uint64_t old = kRootInode + 1; old <= kRootInode + 3; ++old) {
    EXPECT_EQ(store_->statInode("ml/ds/1", old).status().code(), StatusCode::kNotFound) << old;
  }
}

// A follower may be handed a file twice (what it read from the lister's store, then the same
// batch from its feed): the path then holds a new inode, and the one the kernel may have kept
// still leads to it.
TEST_F(ManifestStoreTest, APathPutAgainKeepsItsOldInodeLeadingToIt) {
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("a/x", 1)}).isOk());
  const uint64_t first = store_->stat("ml/ds/1", "a/x")->inode;
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("a/x", 1)}).isOk());
  const uint64_t second = store_->stat("ml/ds/1", "a/x")->inode;
  EXPECT_NE(first, second);
  EXPECT_EQ(store_->statInode("ml/ds/1", first)->path, "a/x");
  EXPECT_EQ(store_->statInode("ml/ds/1", second)->path, "a/x");
  EXPECT_EQ(store_->list("ml/ds/1", "a")->size(), 1u) << "one entry, not two";
}

// Puts of any size, so that their inodes begin and end anywhere in the index's groups.
TEST_F(ManifestStoreTest, EveryFileIsFoundByItsInodeWhateverTheBatches) {
  int n = 0;
  for (const int size : {1, 62, 64, 65, 3, 200, 127}) {
    std::vector<ManifestEntry> batch;
    for (int i = 0; i < size; ++i, ++n) batch.push_back(file("f/" + std::to_string(n), n));
    ASSERT_TRUE(store_->put("ml/ds/1", batch).isOk());
  }
  for (int i = 0; i < n; ++i) {
    const std::string path = "f/" + std::to_string(i);
    const auto entry = store_->stat("ml/ds/1", path);
    ASSERT_TRUE(entry.isOk()) << path;
    const auto byInode = store_->statInode("ml/ds/1", entry->inode);
    ASSERT_TRUE(byInode.isOk()) << path << ": " << byInode.status();
    EXPECT_EQ(byInode->path, path);
  }
  EXPECT_EQ(store_->statInode("ml/ds/1", kRootInode + n + 1).status().code(),
            StatusCode::kNotFound);
}

// A store written before files were counted holds every inode in the point index ("i" NUL
// generation NUL inode → path); a node that takes such a store over (an upgrade that hands the
// node over keeps the kernel's inodes) still answers for them.
TEST_F(ManifestStoreTest, InodesOfAStoreWrittenBeforeFilesWereCountedAreFound) {
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("old/hashed.bin", 7)}).isOk());
  const uint64_t hashed = 0x1234567890abcdef;
  changeDirectly([&](rocksdb::DB& db, const auto&) {
    std::string key("i\0ml/ds/1\0", 10);
    for (int shift = 56; shift >= 0; shift -= 8) key += static_cast<char>((hashed >> shift) & 0xff);
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), key, "old/hashed.bin").ok());
  });
  const auto entry = store_->statInode("ml/ds/1", hashed);
  ASSERT_TRUE(entry.isOk()) << entry.status();
  EXPECT_EQ(entry->path, "old/hashed.bin");
  EXPECT_EQ(entry->size, 7);
}

// The progress stored with a put is the last put's, parts and all, until the listing completes.
TEST_F(ManifestStoreTest, KeepsTheListingsProgressUntilItCompletes) {
  EXPECT_EQ(store_->progress("ml/ds/1").status().code(), StatusCode::kNotFound);
  const ListingProgress first{.source = 1,
                              .ranges = {{.after = "a/f1", .through = "c/"}, {.after = "c/"}},
                              .totals = {.files = 1, .bytes = 7}};
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("a/f1", 7)}, &first).isOk());
  const ListingProgress second{.source = 1,
                               .ranges = {{.after = "c/f2", .through = ""}},
                               .totals = {.files = 2, .bytes = 10}};
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("c/f2", 3)}, &second).isOk());
  store_.reset();
  store_ = std::move(*ManifestStore::open(dir_));
  const auto stored = store_->progress("ml/ds/1");
  ASSERT_TRUE(stored.isOk()) << stored.status();
  EXPECT_EQ(stored->source, 1u);
  EXPECT_EQ(stored->ranges, second.ranges);
  EXPECT_EQ(stored->totals.files, 2);
  EXPECT_EQ(stored->totals.bytes, 10);
  ASSERT_TRUE(store_->markComplete("ml/ds/1", stored->totals).isOk());
  EXPECT_EQ(store_->progress("ml/ds/1").status().code(), StatusCode::kNotFound);
}

// Progress stored before sources were listed in parts (source, files, bytes, the last path) is
// one part, after that path, to the end.
TEST_F(ManifestStoreTest, ProgressStoredBeforePartsIsOnePart) {
  changeDirectly([](rocksdb::DB& db, const auto&) {
    std::string value;
    const uint32_t source = 2;
    const int64_t files = 5, bytes = 50;
    value.append(reinterpret_cast<const char*>(&source), 4);
    value.append(reinterpret_cast<const char*>(&files), 8);
    value.append(reinterpret_cast<const char*>(&bytes), 8);
    value += "d1/f14";
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), std::string("p\0ml/ds/1", 9), value).ok());
  });
  const auto stored = store_->progress("ml/ds/1");
  ASSERT_TRUE(stored.isOk()) << stored.status();
  EXPECT_EQ(stored->source, 2u);
  EXPECT_EQ(stored->ranges, (std::vector<KeyRange>{{.after = "d1/f14", .through = ""}}));
  EXPECT_EQ(stored->totals.files, 5);
  EXPECT_EQ(stored->totals.bytes, 50);
}

// A store written before file entries and inodes had column families of their own is read as it
// was, and a listing of it goes on beside what it holds: stat, readdir, inodes and the pass over
// every file see both in key order, and drop removes both.
TEST_F(ManifestStoreTest, AStoreWrittenBeforeTheColumnFamiliesIsReadAndListedOn) {
  const ListingProgress half{.source = 0, .ranges = {{.after = "d/b"}}, .totals = {.files = 2}};
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("d/a", 1), file("d/b", 2)}, &half).isOk());
  ASSERT_TRUE(store_->put("ml/ds/2", std::vector{file("x", 9)}).isOk());
  ASSERT_TRUE(store_->markComplete("ml/ds/2", {.files = 1, .bytes = 9}).isOk());
  const uint64_t inodeOfB = store_->stat("ml/ds/1", "d/b")->inode;
  moveEverythingToTheDefaultFamily();

  EXPECT_EQ(store_->stat("ml/ds/1", "d/a")->size, 1);
  EXPECT_EQ(store_->statInode("ml/ds/1", inodeOfB)->path, "d/b");
  EXPECT_EQ(store_->progress("ml/ds/1")->ranges, half.ranges);
  EXPECT_EQ(store_->totals("ml/ds/2")->files, 1);
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("d/c", 3), file("e", 4)}).isOk());
  EXPECT_GT(store_->stat("ml/ds/1", "d/c")->inode, inodeOfB);
  EXPECT_EQ(store_->statInode("ml/ds/1", store_->stat("ml/ds/1", "d/c")->inode)->path, "d/c");
  EXPECT_EQ(names(*store_->list("ml/ds/1", "d")), (std::vector<std::string>{"d/a", "d/b", "d/c"}));
  EXPECT_EQ(names(*store_->list("ml/ds/1", "d", "a", 1)), std::vector<std::string>{"d/b"});
  EXPECT_EQ(names(*store_->list("ml/ds/1", "")), (std::vector<std::string>{"d", "e"}));
  std::string cursor;
  std::vector<std::string> every;
  for (;;) {
    const auto batch = store_->files("ml/ds/1", cursor, 1);
    ASSERT_TRUE(batch.isOk()) << batch.status();
    if (batch->empty()) break;
    for (const auto& entry : *batch) every.push_back(entry.path);
  }
  EXPECT_EQ(every, (std::vector<std::string>{"e", "d/a", "d/b", "d/c"}));

  ASSERT_TRUE(store_->drop("ml/ds/1").isOk());
  EXPECT_EQ(store_->stat("ml/ds/1", "d/a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->stat("ml/ds/1", "d/c").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->statInode("ml/ds/1", inodeOfB).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->stat("ml/ds/2", "x")->size, 9);
}

// An older store on a disk too full to add the column families to it opens read-only, and what it
// holds is read from its default family.
TEST_F(ManifestStoreTest, AnOlderStoreOnAFullDiskIsReadOnlyAndServesWhatItHolds) {
  ASSERT_TRUE(store_->put("ml/ds/1", std::vector{file("d/a", 1), file("d/b", 2)}).isOk());
  ASSERT_TRUE(store_->markComplete("ml/ds/1", {.files = 2, .bytes = 3}).isOk());
  const uint64_t inodeOfB = store_->stat("ml/ds/1", "d/b")->inode;
  moveEverythingToTheDefaultFamily(/*dropFamilies=*/true);
  store_.reset();
  const auto disk = dir_.parent_path() / (dir_.filename().string() + "-disk");
  testing::ScopedTmpfs tmpfs(disk, "4m");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << tmpfs.error();
  std::filesystem::copy(dir_, disk / "manifest", std::filesystem::copy_options::recursive);
  {
    std::ofstream filler(disk / "filler", std::ios::binary);
    const std::string block(64 << 10, 'x');
    while (filler.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  auto full = ManifestStore::open(disk / "manifest");
  ASSERT_TRUE(full.isOk()) << full.status();
  EXPECT_EQ((*full)->stat("ml/ds/1", "d/a")->size, 1);
  EXPECT_EQ((*full)->statInode("ml/ds/1", inodeOfB)->path, "d/b");
  EXPECT_EQ(names(*(*full)->list("ml/ds/1", "d")), (std::vector<std::string>{"d/a", "d/b"}));
  EXPECT_EQ((*full)->totals("ml/ds/1")->files, 2);
  EXPECT_EQ((*full)->put("ml/ds/1", std::vector{file("d/c", 3)}).code(),
            StatusCode::kResourceExhausted);
}

TEST_F(ManifestStoreTest, RefusesBadPathsAndASecondOpen) {
  for (const char* bad : {"", "/abs", "a//b", "a/./b", "../up", "a/"}) {
    EXPECT_EQ(store_->put("g", std::vector{file(bad, 1)}).code(), StatusCode::kInvalidArgument)
        << bad;
  }
  auto second = ManifestStore::open(dir_);
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable) << "RocksDB's lock holds";
}

// A refresh walks two manifests side by side in the order files() gives, which must be
// manifestOrder (engine/core/manifest_changes.h), bytes above 0x7f included.
TEST_F(ManifestStoreTest, FilesComeInManifestOrder) {
  std::vector<std::string> paths = {"b",          "a/d",    "a-1/x",  "a/b/c", "a/b/x/d", "a/b0/x",
                                    "a/\xc3\xa9", "\xff/x", "a/\x7f", "a.b",   "z/\x80/q"};
  std::vector<ManifestEntry> files;
  for (const auto& path : paths) files.push_back(file(path, 1));
  ASSERT_TRUE(store_->put("ml/order/1", files).isOk());
  std::string cursor;
  auto listed = store_->files("ml/order/1", cursor, 100);
  ASSERT_TRUE(listed.isOk()) << listed.status();
  std::vector<std::string> order;
  for (const auto& entry : *listed) order.push_back(entry.path);
  std::sort(paths.begin(), paths.end(),
            [](const auto& x, const auto& y) { return manifestOrder(x, y) < 0; });
  EXPECT_EQ(order, paths);
}

}  // namespace
}  // namespace granary::cache
