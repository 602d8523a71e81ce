// Two nodes' drains of the same job's checkpoints, in one process: each copies its closed files
// into the other's tree through a CopyTargets that places them directly (the gRPC transport is
// tested against real cache-node processes). Every byte that reaches the origin or a peer is
// compared with what was written.
#include "engine/checkpoint/peer_copies.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <random>

#include "engine/checkpoint/drainer.h"
#include "engine/checkpoint/restore.h"
#include "engine/origin/make_origin.h"
#include "tests/support/eventually.h"
#include "tests/support/scratch_tree.h"
#include "tests/support/tree_files.h"

namespace granary::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::eventually;
using testing::randomBytes;
using testing::readFile;
using testing::writeFile;

std::map<std::string, std::string> contents(const fs::path& root) {
  return testing::contentsOf(root, std::string(kStagingDirectory));
}

// An origin that is down while `down` is set, and keeps the order of the uploads it took.
class SwitchedWriter final : public OriginWriter {
 public:
  SwitchedWriter(std::unique_ptr<OriginWriter> inner, std::atomic<bool>& down,
                 std::vector<std::string>& order, std::mutex& mutex)
      : inner_(std::move(inner)), down_(down), order_(order), mutex_(mutex) {}
  Status upload(const std::string& path, int fd, int64_t size, const Pace& pace) override {
    if (down_) return unavailable("the origin is down");
    Status s = inner_->upload(path, fd, size, pace);
    std::lock_guard lock(mutex_);
    if (s.isOk()) order_.push_back(path);
    return s;
  }
  Status remove(const std::string& path) override {
    return down_ ? unavailable("the origin is down") : inner_->remove(path);
  }

 private:
  std::unique_ptr<OriginWriter> inner_;
  std::atomic<bool>& down_;
  std::vector<std::string>& order_;
  std::mutex& mutex_;
};

// Copies into one peer's tree, as the cache node's gRPC transport does.
class DirectPeer final : public CopyTargets {
 public:
  DirectPeer(std::string self, CopyPlaces places) : self_(std::move(self)), places_(places) {}
  void connect(Drainer* peer) { peer_ = peer; }
  Set current() const override { return {.generation = 1, .count = peer_ ? 1 : 0}; }
  Status copy(const std::string& path, int fd, const FileIdentity& version, bool atOrigin,
              const OriginWriter::Pace& pace) override {
    if (!pace(version.size)) return cancelled("stopped");
    return placeCopy(places_, *peer_.load(), {self_, path, version, atOrigin}, [&](int to) {
      std::string bytes(static_cast<size_t>(version.size), '\0');
      if (::pread(fd, bytes.data(), bytes.size(), 0) != version.size ||
          ::pwrite(to, bytes.data(), bytes.size(), 0) != version.size)
        return unavailable("short copy");
      return Status::ok();
    });
  }
  Status atOrigin(const std::string& path, const FileIdentity& version) override {
    peer_.load()->copyAtOrigin(self_, path, version);
    return Status::ok();
  }
  Status removed(const std::string& path) override {
    return removeCopy(places_.tree, *peer_.load(), self_, path);
  }

 private:
  const std::string self_;
  const CopyPlaces places_;
  std::atomic<Drainer*> peer_{nullptr};
};

// A node's tree as another node's restore reads it, as the cache node serves it.
class LocalPeerTree final : public PeerTree {
 public:
  LocalPeerTree(std::string node, fs::path tree, Drainer& drainer)
      : node_(std::move(node)), tree_(std::move(tree)), drainer_(drainer) {}
  const std::string& node() const override { return node_; }
  Result<std::vector<PeerFile>> list() override {
    std::vector<PeerFile> files;
    for (const auto& f : drainer_.listing())
      files.push_back({f.path, f.identity.size, f.identity.modifiedNanos, f.atOrigin});
    return files;
  }
  Status read(const PeerFile& file, int fd, const std::function<void(int64_t)>& arrived) override {
    int64_t at = 0;
    return readTreeFile(tree_, file, [&](std::string_view bytes) {
      if (::pwrite(fd, bytes.data(), bytes.size(), at) != static_cast<ssize_t>(bytes.size()))
        return unavailable("short write");
      at += static_cast<int64_t>(bytes.size());
      arrived(static_cast<int64_t>(bytes.size()));
      return Status::ok();
    });
  }

 private:
  const std::string node_;
  const fs::path tree_;
  Drainer& drainer_;
};

class PeerCopiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("granary-peer-copies-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    testing::removeTree(root_);
    for (const char* node : {"a", "b"}) fs::create_directories(root_ / node / "tree");
    fs::create_directories(origin());
  }
  void TearDown() override { testing::removeTree(root_); }

  fs::path tree(const std::string& node) const { return root_ / node / "tree"; }
  fs::path origin() const { return root_ / "origin"; }

  // Node `node`'s drain, copying to the other node's tree (connect() once both run).
  std::unique_ptr<Drainer> start(const std::string& node, std::shared_ptr<DirectPeer> peer) {
    auto writer =
        makeOriginWriter({.uri = "file://" + origin().string()}, {.fileOriginRoots = {root_}});
    EXPECT_TRUE(writer.isOk()) << writer.status();
    auto drainer = Drainer::start(
        {.tree = tree(node), .recordFile = root_ / node / "record", .copies = std::move(peer)},
        std::make_unique<SwitchedWriter>(std::move(*writer), down_, order_, mutex_), realClock());
    EXPECT_TRUE(drainer.isOk()) << drainer.status();
    return std::move(*drainer);
  }
  std::shared_ptr<DirectPeer> peerOf(const std::string& self, const std::string& other) {
    return std::make_shared<DirectPeer>(self, CopyPlaces{tree(other), root_ / other / "copies"});
  }

  // A DCP save on `node`: a file a rank, then .metadata.tmp renamed to .metadata.
  void dcpSave(const std::string& node, const std::string& step, int ranks, uint32_t seed) {
    for (int rank = 0; rank < ranks; ++rank)
      writeFile(tree(node) / step / ("__" + std::to_string(rank) + "_0.distcp"),
                randomBytes(200'000, seed + static_cast<uint32_t>(rank)));
    writeFile(tree(node) / step / ".metadata.tmp", randomBytes(1000, seed + 99));
    fs::rename(tree(node) / step / ".metadata.tmp", tree(node) / step / ".metadata");
  }

  std::vector<std::string> order() {
    std::lock_guard lock(mutex_);
    return order_;
  }

  fs::path root_;
  std::atomic<bool> down_{false};
  std::mutex mutex_;
  std::vector<std::string> order_;
};

TEST_F(PeerCopiesTest, EachClosedFileReachesThePeerWholeAndIsUploadedOnceByItsWriter) {
  auto toB = peerOf("a", "b");
  auto a = start("a", toB);
  auto b = start("b", peerOf("b", "a"));
  toB->connect(b.get());
  dcpSave("a", "step-10", 3, 1);
  ASSERT_TRUE(eventually([&] { return contents(tree("b")) == contents(tree("a")); }));
  ASSERT_TRUE(eventually([&] {
    return a->status().files == 4 && b->status().files == 4 && a->status().drained &&
           b->status().drained;
  }));
  EXPECT_EQ(contents(origin()), contents(tree("a")));
  // Each file once; the drain may also have uploaded and copied .metadata.tmp before its rename
  // (then removed it from the origin and b: their trees are a's, above), which a slow machine
  // shows.
  std::vector<std::string> uploads = order();
  EXPECT_LE(std::erase(uploads, "step-10/.metadata.tmp"), 1u);
  EXPECT_EQ(uploads.size(), 4u) << "b uploads none of a's files: a told it they are there";
  EXPECT_EQ(uploads.back(), "step-10/.metadata");
  const int64_t copiedTmp = a->status().copiedFiles - 4;
  EXPECT_TRUE(copiedTmp == 0 || copiedTmp == 1) << a->status().copiedFiles << " copies";
  EXPECT_EQ(a->status().copiedBytes, 3 * 200'000 + 1000 + copiedTmp * 1000);
  EXPECT_EQ(b->status().writtenBytes, 0) << "copies are not written on b";
  ASSERT_EQ(a->status().checkpoints.size(), 1u);
  EXPECT_TRUE(a->status().checkpoints[0].onPeer);
}

TEST_F(PeerCopiesTest, ALostWritersFilesAreUploadedFromItsPeerMarkerLast) {
  down_ = true;
  auto toB = peerOf("a", "b");
  auto a = start("a", toB);
  auto b = start("b", nullptr);
  toB->connect(b.get());
  dcpSave("a", "step-10", 3, 2);
  writeFile(tree("a") / "latest", "step-10");
  ASSERT_TRUE(eventually(
      [&] { return a->status().checkpoints.size() == 1 && a->status().checkpoints[0].onPeer; }));
  ASSERT_TRUE(eventually([&] { return contents(tree("b")) == contents(tree("a")); }));
  // (A copy of .metadata.tmp made before its rename leaves b's journal as b's tree loses it.)
  EXPECT_TRUE(eventually([&] { return b->status().heldFiles == 5; })) << b->status().heldFiles;
  EXPECT_EQ(b->status().pendingFiles, 0) << "a's to upload while a lives";
  const auto written = contents(tree("a"));
  a.reset();
  testing::removeTree(root_ / "a");  // the node is lost, its disk with it
  down_ = false;
  b->release("a");
  ASSERT_TRUE(eventually([&] { return b->status().drained; }));
  EXPECT_EQ(contents(origin()), written);
  const std::vector<std::string> uploads = order();
  ASSERT_EQ(uploads.size(), 5u);
  const auto position = [&](const std::string& path) {
    return std::find(uploads.begin(), uploads.end(), path) - uploads.begin();
  };
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_LT(position("step-10/__" + std::to_string(rank) + "_0.distcp"),
              position("step-10/.metadata"));
}

TEST_F(PeerCopiesTest, RotationOnTheWriterRemovesItsCopiesOnThePeer) {
  auto toB = peerOf("a", "b");
  auto a = start("a", toB);
  auto b = start("b", nullptr);
  toB->connect(b.get());
  dcpSave("a", "checkpoint-1", 2, 3);
  dcpSave("a", "checkpoint-2", 2, 4);
  ASSERT_TRUE(eventually([&] {
    return a->status().files == 6 && b->status().files == 6 && a->status().drained &&
           b->status().drained;
  }));
  ASSERT_TRUE(fs::exists(tree("b") / "checkpoint-1" / ".metadata"));
  fs::remove_all(tree("a") / "checkpoint-1");
  ASSERT_TRUE(eventually([&] { return !fs::exists(tree("b") / "checkpoint-1"); }));
  ASSERT_TRUE(eventually([&] {
    return a->status().files == 3 && b->status().files == 3 && a->status().drained &&
           b->status().drained;
  }));
  EXPECT_EQ(contents(tree("b")), contents(tree("a")));
  EXPECT_EQ(contents(origin()), contents(tree("a")));
}

TEST_F(PeerCopiesTest, AFileWrittenOnThePeerSinceIsNeitherReplacedNorRemoved) {
  auto b = start("b", nullptr);
  const FileIdentity older{.size = 3, .modifiedNanos = 1};
  writeFile(tree("b") / "latest", "new");  // written now: newer than the copy
  const auto fill = [](int fd) {
    return ::pwrite(fd, "old", 3, 0) == 3 ? Status::ok() : unavailable("short");
  };
  const CopyPlaces places{tree("b"), root_ / "b" / "copies"};
  ASSERT_TRUE(placeCopy(places, *b, {"a", "latest", older, false}, fill).isOk());
  EXPECT_EQ(readFile(tree("b") / "latest"), "new");
  ASSERT_TRUE(removeCopy(tree("b"), *b, "a", "latest").isOk());
  EXPECT_EQ(readFile(tree("b") / "latest"), "new");
}

// The removal of a file's last copy in a directory takes the empty directory away; a copy into
// it that is being filled meanwhile still lands.
TEST_F(PeerCopiesTest, ACopyLandsInADirectoryRemovedWhileItWasFilled) {
  auto b = start("b", nullptr);
  const auto fill = [&](int fd) {
    fs::remove(tree("b") / "step-1");  // empty: made for this copy
    return ::pwrite(fd, "x", 1, 0) == 1 ? Status::ok() : unavailable("short");
  };
  const CopyPlaces places{tree("b"), root_ / "b" / "copies"};
  ASSERT_TRUE(placeCopy(places, *b, {"a", "step-1/__0_0.distcp", {.size = 1}, false}, fill).isOk());
  EXPECT_EQ(readFile(tree("b") / "step-1" / "__0_0.distcp"), "x");
}

TEST_F(PeerCopiesTest, ACopyNeverLandsOutsideTheTree) {
  auto b = start("b", nullptr);
  fs::create_directory_symlink(root_, tree("b") / "escape");
  const auto fill = [](int fd) {
    return ::pwrite(fd, "x", 1, 0) == 1 ? Status::ok() : unavailable("short");
  };
  const CopyPlaces places{tree("b"), root_ / "b" / "copies"};
  for (const std::string path : {"../outside", "/etc/outside", "escape/outside", "a/../../x"}) {
    const Status placed = placeCopy(places, *b, {"a", path, {.size = 1}, false}, fill);
    EXPECT_EQ(placed.code(), StatusCode::kInvalidArgument) << path;
  }
  EXPECT_FALSE(fs::exists(root_ / "outside"));
  const Status bad = placeCopy(places, *b, {"a", "short", {.size = 5}, false}, fill);
  EXPECT_EQ(bad.code(), StatusCode::kCorruption) << "fewer bytes than the version has";
  EXPECT_FALSE(fs::exists(tree("b") / "short"));
}

// A restore on a third node reads the files the origin does not have yet from the peer that
// holds their copies, and those it has from the peer too when the peer has the origin's version.
TEST_F(PeerCopiesTest, ARestoreReadsFromAPeerWhatTheOriginLacksAndWhatItHolds) {
  auto toB = peerOf("a", "b");
  auto a = start("a", toB);
  auto b = start("b", nullptr);
  toB->connect(b.get());
  dcpSave("a", "step-10", 2, 5);
  ASSERT_TRUE(eventually([&] {
    return a->status().files == 3 && a->status().drained && b->status().files == 3 &&
           b->status().drained;
  }));
  down_ = true;  // the next save stays on a and its copy on b
  dcpSave("a", "step-20", 2, 6);
  ASSERT_TRUE(eventually([&] { return b->status().heldFiles == 3; }))
      << "b's journal has them; b holds " << b->status().heldFiles << " of " << b->status().files
      << " files, a copied " << a->status().copiedFiles
      << ", a's last error: " << a->status().lastError;
  ASSERT_EQ(contents(tree("b")), contents(tree("a")));
  const auto written = contents(tree("a"));
  a.reset();  // a is lost

  auto reader =
      cache::makeOrigin({.uri = "file://" + origin().string()}, {.fileOriginRoots = {root_}});
  ASSERT_TRUE(reader.isOk()) << reader.status();
  const fs::path c = root_ / "c";
  fs::create_directories(c / "tree");
  std::stop_source never;
  auto restored = restoreTree(**reader,
                              {.tree = c / "tree",
                               .recordFile = c / "record",
                               .staging = c / "staging",
                               .peers = {std::make_shared<LocalPeerTree>("b", tree("b"), *b)}},
                              never.get_token(), nullptr);
  ASSERT_TRUE(restored.isOk()) << restored.status();
  EXPECT_EQ(contents(c / "tree"), written);
  EXPECT_EQ(restored->files, 6);
  EXPECT_EQ(restored->peerFiles, 6) << "step-10 in the origin's version, step-20 only there";
  // What the origin has is recorded as there; what only peers had, c uploads.
  down_ = false;
  auto writer =
      makeOriginWriter({.uri = "file://" + origin().string()}, {.fileOriginRoots = {root_}});
  ASSERT_TRUE(writer.isOk()) << writer.status();
  auto drainer = Drainer::start({.tree = c / "tree", .recordFile = c / "record"},
                                std::move(*writer), realClock());
  ASSERT_TRUE(drainer.isOk()) << drainer.status();
  Drainer& cDrain = **drainer;
  ASSERT_TRUE(eventually([&] { return cDrain.status().drained; }));
  EXPECT_EQ(cDrain.status().uploadedFiles, 3);
  EXPECT_EQ(contents(origin()), written);
}

// Making room drops only files the origin holds, oldest first; the origin keeps them (no removal
// reaches it, now or after a restart) and a restore brings them back.
TEST_F(PeerCopiesTest, EvictionDropsOnlyWhatTheOriginHoldsAndARestoreBringsItBack) {
  auto b = start("b", nullptr);
  writeFile(tree("b") / "step-1" / "old.bin", randomBytes(300'000, 1));
  writeFile(tree("b") / "step-2" / "mid.bin", randomBytes(200'000, 2));
  ASSERT_TRUE(eventually([&] { return b->status().drained && b->status().files == 2; }));
  down_ = true;
  writeFile(tree("b") / "step-3" / "new.bin", randomBytes(100'000, 3));  // not at the origin
  ASSERT_TRUE(eventually([&] { return b->status().pendingFiles == 1; }));
  EXPECT_EQ(b->evict(1), 300'000) << "the oldest first, only as much as asked";
  EXPECT_FALSE(fs::exists(tree("b") / "step-1" / "old.bin"));
  EXPECT_EQ(b->evict(1 << 30), 200'000) << "never the file not at the origin";
  EXPECT_TRUE(fs::exists(tree("b") / "step-3" / "new.bin"));
  EXPECT_EQ(b->status().evictedFiles, 2);
  down_ = false;
  ASSERT_TRUE(eventually([&] { return b->status().drained; }));
  ASSERT_TRUE(fs::exists(origin() / "step-1" / "old.bin")) << "no removal reached the origin";
  ASSERT_TRUE(fs::exists(origin() / "step-2" / "mid.bin"));
  const auto atOrigin = contents(origin());

  b.reset();  // a restart: the record forgot the evicted files, so they are no removals either
  b = start("b", nullptr);
  ASSERT_TRUE(eventually([&] { return b->status().drained; }));
  EXPECT_EQ(contents(origin()), atOrigin);
  auto reader =
      cache::makeOrigin({.uri = "file://" + origin().string()}, {.fileOriginRoots = {root_}});
  ASSERT_TRUE(reader.isOk());
  b.reset();
  std::stop_source never;
  auto restored = restoreTree(
      **reader, {.tree = tree("b"), .recordFile = root_ / "b" / "record", .staging = root_ / "s"},
      never.get_token(), nullptr);
  ASSERT_TRUE(restored.isOk()) << restored.status();
  EXPECT_EQ(restored->files, 2);
  EXPECT_EQ(contents(tree("b")), atOrigin);
}

}  // namespace
}  // namespace granary::checkpoint
