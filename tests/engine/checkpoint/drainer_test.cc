// The drain and the restore against real directories, a file:// origin and s3rver: every byte
// the origin ends up with is compared with what was written.
#include "engine/checkpoint/drainer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "common/owned_fd.h"
#include "engine/checkpoint/restore.h"
#include "engine/checkpoint/s3_writer.h"
#include "engine/origin/make_origin.h"
#include "tests/support/eventually.h"
#include "tests/support/s3rver.h"
#include "tests/support/scratch_tree.h"
#include "tests/support/tree_files.h"

namespace granary::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::eventually;
using testing::randomBytes;
using testing::readFile;
using testing::writeFile;

const std::string kSourceDir = GRANARY_SOURCE_DIR;

std::map<std::string, std::string> contents(const fs::path& root) {
  return testing::contentsOf(root, std::string(kStagingDirectory));
}

// A writer that passes steps on to another and keeps the order in which uploads finished; it
// fails the first `failures` uploads as an origin that is down would.
class RecordingWriter final : public OriginWriter {
 public:
  RecordingWriter(std::unique_ptr<OriginWriter> inner, int failures)
      : inner_(std::move(inner)), failures_(failures) {}
  Status upload(const std::string& path, int fd, int64_t size, const Pace& pace) override {
    if (failures_.fetch_sub(1) > 0) return unavailable("the origin is down");
    Status s = inner_->upload(path, fd, size, pace);
    std::lock_guard lock(mutex_);
    if (s.isOk()) order_.push_back(path);
    return s;
  }
  Status remove(const std::string& path) override { return inner_->remove(path); }
  std::vector<std::string> order() {
    std::lock_guard lock(mutex_);
    return order_;
  }

 private:
  std::unique_ptr<OriginWriter> inner_;
  std::atomic<int> failures_;
  std::mutex mutex_;
  std::vector<std::string> order_;
};

class DrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("granary-drainer-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    testing::removeTree(root_);
    fs::create_directories(tree());
    fs::create_directories(origin());
  }
  void TearDown() override { testing::removeTree(root_); }

  fs::path tree() const { return root_ / "tree"; }
  fs::path origin() const { return root_ / "origin"; }
  fs::path record() const { return root_ / "record"; }
  cache::SourceSpec source() const { return {.uri = "file://" + origin().string()}; }
  cache::OriginSettings settings() const { return {.fileOriginRoots = {root_}}; }

  std::unique_ptr<OriginWriter> fileWriter() {
    auto writer = makeOriginWriter(source(), settings());
    EXPECT_TRUE(writer.isOk()) << writer.status();
    return std::move(*writer);
  }

  std::unique_ptr<Drainer> start(std::unique_ptr<OriginWriter> writer, int64_t bandwidth = 0) {
    auto drainer = Drainer::start(
        {.tree = tree(), .recordFile = record(), .bandwidthBytesPerSecond = bandwidth},
        std::move(writer), realClock());
    EXPECT_TRUE(drainer.isOk()) << drainer.status();
    return drainer.isOk() ? std::move(*drainer) : nullptr;
  }

  // The origin holds what the tree does, byte for byte (a .metadata.tmp's rename seen, too).
  bool originIsTree() const { return contents(origin()) == contents(tree()); }
  static bool drained(Drainer& drainer) { return drainer.waitDrained(timeout(), nullptr); }
  static std::stop_token timeout() {
    static std::stop_source never;
    return never.get_token();
  }

  // A DCP save as torch.distributed.checkpoint writes it: a file a rank, then the coordinator's
  // .metadata.tmp renamed to .metadata.
  void dcpSave(const std::string& step, int ranks, size_t bytes, uint32_t seed) {
    for (int rank = 0; rank < ranks; ++rank)
      writeFile(tree() / step / ("__" + std::to_string(rank) + "_0.distcp"),
                randomBytes(bytes, seed + static_cast<uint32_t>(rank)));
    writeFile(tree() / step / ".metadata.tmp", randomBytes(1000, seed + 99));
    fs::rename(tree() / step / ".metadata.tmp", tree() / step / ".metadata");
  }

  fs::path root_;
};

TEST_F(DrainerTest, ADcpSaveReachesTheOriginWholeWithItsMarkerLast) {
  auto recording = std::make_unique<RecordingWriter>(fileWriter(), 0);
  RecordingWriter* writer = recording.get();
  auto drainer = start(std::move(recording));
  ASSERT_NE(drainer, nullptr);
  dcpSave("step-100", 4, 3 << 20, 1);
  ASSERT_TRUE(eventually([&] { return originIsTree(); }));
  ASSERT_TRUE(drained(*drainer));
  EXPECT_EQ(contents(origin()), contents(tree()));
  const std::vector<std::string> order = writer->order();
  ASSERT_FALSE(order.empty());
  EXPECT_EQ(order.back(), "step-100/.metadata");
  // .metadata.tmp is renamed right after its close: the drain uploads it only if it reached it
  // in between (and then removes it at the origin, which the comparison above checks).
  const auto tmpUploads = std::count(order.begin(), order.end(), "step-100/.metadata.tmp");
  EXPECT_LE(tmpUploads, 1);
  const DrainStatus s = drainer->status();
  EXPECT_EQ(s.uploadedBytes, 4 * (3 << 20) + 1000 + tmpUploads * 1000);
  ASSERT_EQ(s.checkpoints.size(), 1u);
  EXPECT_TRUE(s.checkpoints[0].atOrigin);
  EXPECT_EQ(s.lag.count(), 0);
}

TEST_F(DrainerTest, RotationRemovesTheCheckpointAtTheOrigin) {
  auto drainer = start(fileWriter());
  dcpSave("checkpoint-1", 2, 1000, 1);
  dcpSave("checkpoint-2", 2, 1000, 2);
  // A .metadata.tmp the drain reached before its rename is uploaded and then removed: once the
  // origin is the tree and the drain idle, the removals from here on are the rotation's.
  ASSERT_TRUE(eventually([&] { return originIsTree(); }));
  ASSERT_TRUE(drained(*drainer));
  const int64_t removedBefore = drainer->status().removedFiles;
  fs::remove_all(tree() / "checkpoint-1");  // HF's rotation: shutil.rmtree
  ASSERT_TRUE(eventually([&] { return !fs::exists(origin() / "checkpoint-1"); }));
  ASSERT_TRUE(drained(*drainer));
  EXPECT_EQ(contents(origin()), contents(tree()));
  EXPECT_EQ(drainer->status().removedFiles - removedBefore, 3);
}

TEST_F(DrainerTest, ADrainStartedAgainUploadsOnlyWhatChangedAndRemovesWhatWent) {
  {
    auto drainer = start(fileWriter());
    dcpSave("a", 2, 5000, 1);
    dcpSave("b", 2, 5000, 2);
    ASSERT_TRUE(eventually([&] { return originIsTree(); }));
    ASSERT_TRUE(drained(*drainer));
  }
  // While no drain runs: a checkpoint removed, a file written again, a new one.
  fs::remove_all(tree() / "a");
  writeFile(tree() / "b" / "__0_0.distcp", randomBytes(6000, 7));
  writeFile(tree() / "latest", "b");
  auto drainer = start(fileWriter());
  ASSERT_TRUE(drained(*drainer));
  EXPECT_EQ(contents(origin()), contents(tree()));
  const DrainStatus s = drainer->status();
  EXPECT_EQ(s.uploadedFiles, 2);
  EXPECT_EQ(s.removedFiles, 3);
}

// A symlink to the newest checkpoint is told in the status and left out of the drain.
TEST_F(DrainerTest, ASymlinkIsToldAndNotDrained) {
  auto drainer = start(fileWriter());
  dcpSave("step-1", 1, 1000, 1);
  fs::create_directory_symlink("step-1", tree() / "last");
  ASSERT_TRUE(eventually([&] {
    const DrainStatus s = drainer->status();
    return s.files == 2 && s.links == std::vector<std::string>{"last"};
  }));
  ASSERT_TRUE(drained(*drainer));
  EXPECT_FALSE(fs::exists(fs::symlink_status(origin() / "last")));
  EXPECT_EQ(contents(origin()), contents(tree()));
  fs::remove(tree() / "last");
  EXPECT_TRUE(eventually([&] { return drainer->status().links.empty(); }));
}

TEST_F(DrainerTest, AnOriginThatIsDownDelaysTheDrainAndLosesNothing) {
  auto drainer = start(std::make_unique<RecordingWriter>(fileWriter(), 2));
  dcpSave("step-1", 2, 2000, 3);
  ASSERT_TRUE(eventually([&] { return drainer->status().failedSteps >= 1; }));
  EXPECT_NE(drainer->status().lastError.find("the origin is down"), std::string::npos);
  ASSERT_TRUE(drained(*drainer));
  EXPECT_EQ(contents(origin()), contents(tree()));
  EXPECT_EQ(drainer->status().lastError, "");
}

// A directory moved into the tree with a file still open for writing in it: the scan of the new
// directory cannot see the close (it may come before or after the watch); the file is not taken
// as closed while it changes, and the origin never holds part of it.
TEST_F(DrainerTest, AFileStillBeingWrittenInANewDirectoryIsNotUploadedInPart) {
  auto drainer = start(fileWriter());
  const fs::path outside = root_ / "outside" / "step-1";
  fs::create_directories(outside);
  OwnedFd file(::open((outside / "model.pt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  ASSERT_TRUE(file);
  const std::string bytes = randomBytes(1 << 20, 9);
  ASSERT_EQ(::write(file.get(), bytes.data(), 64 << 10), 64 << 10);
  fs::rename(outside, tree() / "step-1");  // the scan finds it open, 64 KiB long
  ASSERT_TRUE(eventually([&] { return drainer->status().files == 1; }));
  // Time for the upload attempts: what is checked is that nothing arrives meanwhile.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_FALSE(fs::exists(origin() / "step-1" / "model.pt")) << "part of a file reached the origin";
  ASSERT_EQ(::write(file.get(), bytes.data() + (64 << 10), bytes.size() - (64 << 10)),
            static_cast<ssize_t>(bytes.size() - (64 << 10)));
  file = OwnedFd();  // the close
  ASSERT_TRUE(eventually([&] { return readFile(origin() / "step-1" / "model.pt") == bytes; }));
  ASSERT_TRUE(drained(*drainer));
}

// A drain started again (a restart, a new pod taking the node over) while a rank still writes:
// the file is found open, left alone, and reaches the origin whole once closed, its marker after.
TEST_F(DrainerTest, AFileOpenAcrossARestartReachesTheOriginOnceClosed) {
  OwnedFd file(::open((tree() / "optimizer.pt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
  ASSERT_TRUE(file);
  const std::string bytes = randomBytes(1 << 20, 9);
  {
    auto drainer = start(fileWriter());
    ASSERT_EQ(::write(file.get(), bytes.data(), 64 << 10), 64 << 10);
    ASSERT_TRUE(eventually([&] { return drainer->status().files == 1; }));
  }
  auto drainer = start(fileWriter());
  writeFile(tree() / "latest", "1");
  ASSERT_TRUE(eventually([&] { return drainer->status().files == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // time for upload attempts
  EXPECT_FALSE(fs::exists(origin() / "optimizer.pt")) << "part of a file reached the origin";
  EXPECT_FALSE(fs::exists(origin() / "latest")) << "a marker before the file it follows";
  ASSERT_EQ(::write(file.get(), bytes.data() + (64 << 10), bytes.size() - (64 << 10)),
            static_cast<ssize_t>(bytes.size() - (64 << 10)));
  file = OwnedFd();  // the close
  ASSERT_TRUE(eventually([&] { return readFile(origin() / "optimizer.pt") == bytes; }));
  ASSERT_TRUE(drained(*drainer));
  EXPECT_EQ(readFile(origin() / "latest"), "1");
}

TEST_F(DrainerTest, AFileWrittenAgainDuringItsUploadReachesTheOriginAsItEnds) {
  auto drainer = start(fileWriter(), 2 << 20);  // 2 MiB/s: the first upload takes 4 s
  writeFile(tree() / "model.pt", randomBytes(8 << 20, 1));
  ASSERT_TRUE(eventually(
      [&] { return drainer->status().uploadedBytes == 0 && drainer->status().files == 1; }));
  writeFile(tree() / "model.pt", randomBytes(1 << 20, 2));  // torch.save again: O_TRUNC
  ASSERT_TRUE(eventually([&] {
    const DrainStatus s = drainer->status();
    return s.drained && s.files == 1;
  }));
  EXPECT_EQ(readFile(origin() / "model.pt"), readFile(tree() / "model.pt"));
}

TEST_F(DrainerTest, ARestoreBringsTheOriginsFilesAndKeepsNewerLocalOnes) {
  {
    auto drainer = start(fileWriter());
    dcpSave("step-1", 3, 4 << 20, 1);
    dcpSave("step-2", 3, 1000, 2);
    ASSERT_TRUE(eventually([&] { return originIsTree(); }));
    ASSERT_TRUE(drained(*drainer));
  }
  const auto written = contents(tree());
  // Another node: an empty tree, no record; one file of its own not drained yet.
  const fs::path other = root_ / "other";
  writeFile(other / "tree" / "step-3" / "__0_0.distcp", "new");
  auto reader = cache::makeOrigin(source(), settings());
  ASSERT_TRUE(reader.isOk()) << reader.status();
  const RestoreOptions where{
      .tree = other / "tree", .recordFile = other / "record", .staging = other / "staging"};
  auto restored = restoreTree(**reader, where, timeout(), [](const RestoreProgress&) {});
  ASSERT_TRUE(restored.isOk()) << restored.status();
  EXPECT_EQ(restored->files, 8);
  EXPECT_EQ(restored->localFiles, 0);
  auto expected = written;
  expected["step-3/__0_0.distcp"] = "new";
  EXPECT_EQ(contents(other / "tree"), expected);
  EXPECT_FALSE(fs::exists(other / "staging"));

  // Its drain uploads only its own file.
  auto drainer = Drainer::start({.tree = other / "tree", .recordFile = other / "record"},
                                fileWriter(), realClock());
  ASSERT_TRUE(drainer.isOk()) << drainer.status();
  ASSERT_TRUE(drained(**drainer));
  EXPECT_EQ((*drainer)->status().uploadedFiles, 1);
  EXPECT_EQ(contents(origin()), expected);
}

TEST_F(DrainerTest, ARestoreRemovesWhatTheOriginNoLongerHasUnlessItChangedHere) {
  {
    auto drainer = start(fileWriter());
    dcpSave("step-1", 2, 1000, 1);
    dcpSave("step-2", 2, 1000, 2);
    ASSERT_TRUE(eventually([&] { return originIsTree(); }));
    ASSERT_TRUE(drained(*drainer));
  }
  fs::remove_all(origin() / "step-1");  // rotated away by another node
  writeFile(tree() / "step-1" / "__1_0.distcp", "changed here");
  auto reader = cache::makeOrigin(source(), settings());
  ASSERT_TRUE(reader.isOk());
  auto restored = restoreTree(**reader, {tree(), record(), root_ / "staging"}, timeout(),
                              [](const RestoreProgress&) {});
  ASSERT_TRUE(restored.isOk()) << restored.status();
  EXPECT_EQ(restored->removedFiles, 2);
  EXPECT_FALSE(fs::exists(tree() / "step-1" / ".metadata"));
  EXPECT_EQ(readFile(tree() / "step-1" / "__1_0.distcp"), "changed here");
  EXPECT_EQ(restored->localFiles, 3);
}

TEST_F(DrainerTest, AUriOutsideTheRootsOrAPathOutsideTheTreeIsRefused) {
  auto outside = makeOriginWriter({.uri = "file:///etc/granary-ckpt"}, settings());
  ASSERT_FALSE(outside.isOk());
  EXPECT_EQ(outside.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("fileOriginRoots"), std::string::npos);
  EXPECT_FALSE(fs::exists("/etc/granary-ckpt"));
  auto http = makeOriginWriter({.uri = "https://example.com/ckpt/"}, settings());
  EXPECT_EQ(http.status().code(), StatusCode::kInvalidArgument);
  auto writer = fileWriter();
  EXPECT_EQ(writer->remove("../tree/x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(writer->upload("/etc/passwd", 0, 0, [](int64_t) { return true; }).code(),
            StatusCode::kInvalidArgument);
}

// ---- s3:// against s3rver ----

class S3DrainerTest : public DrainerTest {
 protected:
  static void SetUpTestSuite() { s3_.start(kSourceDir); }
  static void TearDownTestSuite() { s3_.stop(); }
  void SetUp() override {
    if (!s3_.skip.empty()) GTEST_SKIP() << s3_.skip;
    ASSERT_NE(s3_.server, nullptr) << s3_.error;
    DrainerTest::SetUp();
  }
  cache::SourceSpec s3Source(const std::string& prefix) const {
    return {.uri = "s3://data/" + prefix,
            .endpoint = s3_.server->endpoint(),
            .accessKeyId = Secret("S3RVER"),  // s3rver's built-in account: requests are signed
            .secretAccessKey = Secret("S3RVER")};
  }

  static inline cache::SuiteS3rver s3_;
};

TEST_F(S3DrainerTest, LargeFilesGoInPartsAndARestoreReadsThemBack) {
  auto writer = makeOriginWriter(s3Source("runs/llama/"), {});
  ASSERT_TRUE(writer.isOk()) << writer.status();
  auto drainer = start(std::move(*writer));
  writeFile(tree() / "step-1" / "__0_0.distcp", randomBytes(kMultipartAbove * 2 + 12345, 1));
  dcpSave("step-1", 1, 1000, 2);  // __0_0 again, small, and the marker
  writeFile(tree() / "step-1" / "__1_0.distcp", randomBytes(kMultipartAbove + 1, 3));
  ASSERT_TRUE(eventually([&] { return drainer->status().files == 3; }));
  ASSERT_TRUE(drained(*drainer));
  fs::remove_all(tree() / "step-0");
  writeFile(tree() / "step-0" / "old", "x");
  ASSERT_TRUE(eventually([&] { return drainer->status().files == 4; }));
  ASSERT_TRUE(drained(*drainer));
  fs::remove_all(tree() / "step-0");
  ASSERT_TRUE(eventually([&] { return drainer->status().files == 3; }));
  ASSERT_TRUE(drained(*drainer));

  auto reader = cache::makeOrigin(s3Source("runs/llama/"), {});
  ASSERT_TRUE(reader.isOk()) << reader.status();
  const fs::path other = root_ / "other";
  auto restored = restoreTree(**reader, {other / "tree", other / "record", other / "staging"},
                              timeout(), [](const RestoreProgress&) {});
  ASSERT_TRUE(restored.isOk()) << restored.status();
  EXPECT_EQ(restored->files, 3);
  EXPECT_EQ(contents(other / "tree"), contents(tree()));
}

TEST_F(S3DrainerTest, AStoppedMultipartUploadLeavesNothingAtTheOrigin) {
  auto writer = makeOriginWriter(s3Source("stopped/"), {});
  ASSERT_TRUE(writer.isOk()) << writer.status();
  const fs::path file = root_ / "big";
  writeFile(file, randomBytes(kMultipartAbove * 3, 4));
  OwnedFd fd(::open(file.c_str(), O_RDONLY));
  int64_t sent = 0;
  const Status s = (*writer)->upload("big", fd.get(), kMultipartAbove * 3, [&](int64_t bytes) {
    sent += bytes;
    return sent <= kMultipartAbove + (1 << 20);  // stops in the second part
  });
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  auto reader = cache::makeOrigin(s3Source("stopped/"), {});
  ASSERT_TRUE(reader.isOk());
  int listed = 0;
  ASSERT_TRUE((*reader)
                  ->list([&](std::vector<cache::OriginObject>&& batch) {
                    listed += static_cast<int>(batch.size());
                    return Status::ok();
                  })
                  .isOk());
  EXPECT_EQ(listed, 0);
}

}  // namespace
}  // namespace granary::checkpoint
