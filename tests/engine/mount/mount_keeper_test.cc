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

#include "common/unix_socket.h"
#include "tests/support/eventually.h"
#include "tests/support/scratch_tree.h"

namespace granary::cache {
namespace {

using granary::testing::removeTree;

const Secret kToken("node-token");

class MountKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = std::filesystem::temp_directory_path() /
              ("granary-keeper-" + std::to_string(::getpid()) + ".sock");
    auto keeper = MountKeeper::listen(socket_, kToken);
    ASSERT_TRUE(keeper.isOk()) << keeper.status();
    client_ = KeeperClient(socket_, kToken);
    keeper_ = std::move(*keeper);
    serving_ = std::jthread([this](std::stop_token stop) { keeper_->serve(stop); });
  }
  void TearDown() override {
    serving_ = {};
    keeper_.reset();
    EXPECT_FALSE(std::filesystem::exists(socket_));
  }

  std::filesystem::path socket_;
  KeeperClient client_;
  std::unique_ptr<MountKeeper> keeper_;
  std::jthread serving_;
};

TEST_F(MountKeeperTest, HandsBackWhatItKeepsUntilDroppedOrEnded) {
  int first[2], second[2];
  ASSERT_EQ(::pipe(first), 0);
  ASSERT_EQ(::pipe(second), 0);
  ASSERT_TRUE(client_.keep("/mnt/a", first[1]).isOk());
  ASSERT_TRUE(client_.keep("/mnt/b", second[1]).isOk());
  ::close(first[1]);  // only the keeper holds the write ends now
  ::close(second[1]);

  auto kept = client_.kept();
  ASSERT_TRUE(kept.isOk()) << kept.status();
  ASSERT_EQ(kept->size(), 2u);
  // The descriptor handed back is the same pipe.
  ASSERT_EQ(::write(kept->at("/mnt/a").get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(first[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  kept->clear();

  ASSERT_TRUE(client_.drop("/mnt/a").isOk());
  ASSERT_TRUE(client_.drop("/mnt/unknown").isOk());
  ASSERT_EQ(::read(first[0], &c, 1), 0) << "dropped: the last writer is gone";

  // The other one ends (its reader goes); the keeper forgets it by itself.
  ::close(second[0]);
  EXPECT_TRUE(testing::eventually(
      [&] {
        kept = client_.kept();
        return kept.isOk() && kept->empty();
      },
      std::chrono::seconds(5)));
  ::close(first[0]);
}

TEST_F(MountKeeperTest, KeepingTheSameMountAgainReplacesIt) {
  int first[2], second[2];
  ASSERT_EQ(::pipe(first), 0);
  ASSERT_EQ(::pipe(second), 0);
  ASSERT_TRUE(client_.keep("/mnt/a", first[1]).isOk());
  ASSERT_TRUE(client_.keep("/mnt/a", second[1]).isOk());
  ::close(first[1]);
  ::close(second[1]);
  char c;
  EXPECT_EQ(::read(first[0], &c, 1), 0) << "the first one was let go";
  auto kept = client_.kept();
  ASSERT_TRUE(kept.isOk());
  ASSERT_EQ(kept->size(), 1u);
  ASSERT_EQ(::write(kept->at("/mnt/a").get(), "y", 1), 1);
  ASSERT_EQ(::read(second[0], &c, 1), 1);
  ::close(first[0]);
  ::close(second[0]);
}

// Another pod on the node must not take or inject a FUSE connection: a request without the
// node's token is refused and changes nothing.
TEST_F(MountKeeperTest, RefusesRequestsWithoutTheNodesToken) {
  int pipe[2];
  ASSERT_EQ(::pipe(pipe), 0);
  ASSERT_TRUE(client_.keep("/mnt/a", pipe[1]).isOk());
  const KeeperClient stranger(socket_, Secret("guessed"));
  const Status listed = stranger.kept().status();
  EXPECT_EQ(listed.code(), StatusCode::kUnavailable);
  EXPECT_NE(listed.message().find("wrong token"), std::string::npos) << listed;
  EXPECT_FALSE(stranger.keep("/mnt/a", pipe[0]).isOk()) << "no connection injected";
  EXPECT_FALSE(stranger.drop("/mnt/a").isOk());
  auto kept = client_.kept();
  ASSERT_TRUE(kept.isOk());
  ASSERT_EQ(kept->size(), 1u);
  ASSERT_EQ(::write(kept->at("/mnt/a").get(), "z", 1), 1) << "still the first connection";
  char c;
  ASSERT_EQ(::read(pipe[0], &c, 1), 1);
  ::close(pipe[0]);
  ::close(pipe[1]);
}

// The first keeper's requests carried no protocol: one is answered with what this keeper
// speaks, never served.
TEST_F(MountKeeperTest, AnswersARequestOfTheFirstProtocolWithWhatItSpeaks) {
  auto socket = unix_socket::connectTo(socket_, std::chrono::seconds(2));
  ASSERT_TRUE(socket.isOk());
  ASSERT_TRUE(unix_socket::sendMessage(socket->get(), "list"));
  std::string answer;
  OwnedFd none;
  ASSERT_TRUE(unix_socket::receiveMessage(socket->get(), answer, none));
  EXPECT_EQ(answer, "unknown request: this side speaks granary-keeper/2");
}

// A pod replaced: the new pod's keeper starts at the same node-scoped socket while the old one
// runs, takes what it keeps and its listening socket, so that the mounts outlive the old keeper
// and no request meets a moment without a keeper.
TEST_F(MountKeeperTest, ANewKeeperTakesOverTheMountsAndTheSocketOfTheOldOne) {
  int pipe[2];
  ASSERT_EQ(::pipe(pipe), 0);
  ASSERT_TRUE(client_.keep("/mnt/a", pipe[1]).isOk());
  ::close(pipe[1]);

  auto successor = MountKeeper::listen(socket_, kToken);
  ASSERT_TRUE(successor.isOk()) << successor.status();
  std::jthread serving([&](std::stop_token stop) { (*successor)->serve(stop); });
  serving_ = {};  // the old keeper stops, as its pod ends
  keeper_.reset();
  EXPECT_TRUE(std::filesystem::exists(socket_)) << "the successor's socket stays";

  auto kept = client_.kept();
  ASSERT_TRUE(kept.isOk()) << kept.status();
  ASSERT_EQ(kept->size(), 1u);
  ASSERT_EQ(::write(kept->at("/mnt/a").get(), "w", 1), 1);
  kept->clear();
  char c;
  ASSERT_EQ(::read(pipe[0], &c, 1), 1) << "the connection outlived the old keeper";
  serving = {};
  successor->reset();
  ASSERT_EQ(::read(pipe[0], &c, 1), 0) << "and ends with the last one";
  ::close(pipe[0]);
}

TEST(MountKeeperClientTest, AnUnreachableKeeperIsUnavailable) {
  const auto status = KeeperClient("/nonexistent/keeper.sock", kToken).kept().status();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("/nonexistent/keeper.sock"), std::string::npos);
  EXPECT_EQ(KeeperClient(std::string(200, 'x'), kToken).keep("/mnt/a", 0).code(),
            StatusCode::kInvalidArgument);
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
  removeTree(scratch);
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
