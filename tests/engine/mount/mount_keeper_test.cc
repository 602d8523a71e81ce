// The mount keeper's protocol over a real unix socket, with pipes standing in for FUSE
// connections (a pipe's write end polls POLLERR once its reader is gone, as a FUSE descriptor
// does once its mount is); and the check at start of what the keeper needs of the kernel.
#include "engine/mount/mount_keeper.h"

#include <gtest/gtest.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>
#include <utility>

#include "tests/support/eventually.h"

namespace granary::cache {
namespace {

class MountKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = std::filesystem::temp_directory_path() /
              ("granary-keeper-" + std::to_string(::getpid()) + ".sock");
    auto keeper = MountKeeper::listen(socket_);
    ASSERT_TRUE(keeper.isOk()) << keeper.status();
    keeper_ = std::move(*keeper);
    serving_ = std::jthread([this](std::stop_token stop) { keeper_->serve(stop); });
  }
  void TearDown() override {
    serving_ = {};
    keeper_.reset();
    EXPECT_FALSE(std::filesystem::exists(socket_));
  }

  std::filesystem::path socket_;
  std::unique_ptr<MountKeeper> keeper_;
  std::jthread serving_;
};

TEST_F(MountKeeperTest, HandsBackWhatItKeepsUntilDroppedOrEnded) {
  int first[2], second[2];
  ASSERT_EQ(::pipe(first), 0);
  ASSERT_EQ(::pipe(second), 0);
  ASSERT_TRUE(keepMount(socket_, "/mnt/a", first[1]).isOk());
  ASSERT_TRUE(keepMount(socket_, "/mnt/b", second[1]).isOk());
  ::close(first[1]);  // only the keeper holds the write ends now
  ::close(second[1]);

  auto kept = keptMounts(socket_);
  ASSERT_TRUE(kept.isOk()) << kept.status();
  ASSERT_EQ(kept->size(), 2u);
  // The descriptor handed back is the same pipe.
  ASSERT_EQ(::write(kept->at("/mnt/a").get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(first[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  kept->clear();

  ASSERT_TRUE(dropMount(socket_, "/mnt/a").isOk());
  ASSERT_TRUE(dropMount(socket_, "/mnt/unknown").isOk());
  ASSERT_EQ(::read(first[0], &c, 1), 0) << "dropped: the last writer is gone";

  // The other one ends (its reader goes); the keeper forgets it by itself.
  ::close(second[0]);
  EXPECT_TRUE(testing::eventually(
      [&] {
        kept = keptMounts(socket_);
        return kept.isOk() && kept->empty();
      },
      std::chrono::seconds(5)));
  ::close(first[0]);
}

TEST_F(MountKeeperTest, KeepingTheSameMountAgainReplacesIt) {
  int first[2], second[2];
  ASSERT_EQ(::pipe(first), 0);
  ASSERT_EQ(::pipe(second), 0);
  ASSERT_TRUE(keepMount(socket_, "/mnt/a", first[1]).isOk());
  ASSERT_TRUE(keepMount(socket_, "/mnt/a", second[1]).isOk());
  ::close(first[1]);
  ::close(second[1]);
  char c;
  EXPECT_EQ(::read(first[0], &c, 1), 0) << "the first one was let go";
  auto kept = keptMounts(socket_);
  ASSERT_TRUE(kept.isOk());
  ASSERT_EQ(kept->size(), 1u);
  ASSERT_EQ(::write(kept->at("/mnt/a").get(), "y", 1), 1);
  ASSERT_EQ(::read(second[0], &c, 1), 1);
  ::close(first[0]);
  ::close(second[0]);
}

TEST(MountKeeperClientTest, AnUnreachableKeeperIsUnavailable) {
  const auto status = keptMounts("/nonexistent/keeper.sock").status();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("/nonexistent/keeper.sock"), std::string::npos);
  EXPECT_EQ(keepMount(std::string(200, 'x'), "/mnt/a", 0).code(), StatusCode::kInvalidArgument);
}

// Linux major.minor from uname, e.g. {6, 9}.
std::pair<int, int> kernelVersion() {
  utsname name{};
  int major = 0, minor = 0;
  if (::uname(&name) == 0) std::sscanf(name.release, "%d.%d", &major, &minor);
  return {major, minor};
}

bool mountedAnywhere(const std::string& type) {
  std::ifstream mounts("/proc/self/mounts");
  for (std::string source, point, fsType, rest; mounts >> source >> point >> fsType;) {
    std::getline(mounts, rest);
    if (fsType == type) return true;
  }
  return false;
}

TEST(MountRecoveryTest, SaysWhetherThisKernelCarriesMountsAcrossARestart) {
  if (::geteuid() != 0 || !std::filesystem::exists("/dev/fuse"))
    GTEST_SKIP() << "needs root and /dev/fuse";
  const auto scratch =
      std::filesystem::temp_directory_path() / ("granary-recovery-" + std::to_string(::getpid()));
  const Status recovery = checkMountRecovery(scratch);
  // Upstream kernels learnt FUSE_NOTIFY_RESEND in 6.9 (a distribution may backport it earlier).
  if (kernelVersion() >= std::pair(6, 9)) {
    EXPECT_TRUE(recovery.isOk()) << recovery;
  } else {
    EXPECT_EQ(recovery.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(recovery.message().find("FUSE_NOTIFY_RESEND"), std::string::npos) << recovery;
  }
  EXPECT_FALSE(mountedAnywhere("fuse.granary-probe")) << "the scratch mount is gone";
  EXPECT_TRUE(std::filesystem::is_empty(scratch)) << "and so is its mount point";
  std::filesystem::remove_all(scratch);
}

TEST(MountRecoveryTest, NamesWhatIsMissing) {
  const auto scratch =
      std::filesystem::temp_directory_path() / ("granary-recovery-" + std::to_string(::getpid()));
  const Status recovery = checkMountRecovery(scratch, "/nonexistent/fuse");
  EXPECT_EQ(recovery.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(recovery.message().find("cannot open /nonexistent/fuse"), std::string::npos)
      << recovery;
  std::filesystem::remove_all(scratch);
}

}  // namespace
}  // namespace granary::cache
