// The mount keeper's protocol over a real unix socket, with pipes standing in for FUSE
// connections (a pipe's write end polls POLLERR once its reader is gone, as a FUSE descriptor
// does once its mount is).
#include "cache-node/mount/mount_keeper.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

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
  for (int i = 0; i < 100; ++i) {
    kept = keptMounts(socket_);
    ASSERT_TRUE(kept.isOk());
    if (kept->empty()) break;
    kept->clear();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(kept->empty());
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

}  // namespace
}  // namespace granary::cache
