// The hand-over between two cache-node processes of one node, over a real unix socket, both
// sides in this process: the successor's request, the old node's release, and every way the old
// side can fail to hand over (none listening, another protocol, another token, stopped first).
#include "cache-node/handover.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "cache-node/ensured_record.h"
#include "common/unix_socket.h"
#include "tests/support/eventually.h"

namespace granary::cache {
namespace {

const Secret kToken("node-token");

class HandoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = std::filesystem::temp_directory_path() /
              ("granary-handover-" + std::to_string(::getpid())) / "handover.sock";
  }
  void TearDown() override { std::filesystem::remove_all(socket_.parent_path()); }

  std::filesystem::path socket_;
};

v1::EnsureDatasetRequest requestFor(const std::string& name, int64_t generation) {
  v1::EnsureDatasetRequest request;
  request.mutable_dataset()->set_namespace_("ml");
  request.mutable_dataset()->set_name(name);
  request.mutable_dataset()->set_generation(generation);
  request.add_mounts()->mutable_source()->set_uri("s3://bucket/" + name + "/");
  return request;
}

TEST_F(HandoverTest, NoOneListeningIsAFirstStart) {
  auto taken = takeOverNode(socket_, kToken);
  ASSERT_TRUE(taken.isOk()) << taken.status();
  EXPECT_FALSE(taken->has_value());
}

// The old node is asked, releases (on its own thread, as its main loop does) and hands over what
// it served, in order, less what was purged.
TEST_F(HandoverTest, TheOldNodeReleasesAndHandsOverWhatItServed) {
  EnsuredRecord record;
  record.ensured(requestFor("coco", 1));
  record.ensured(requestFor("imagenet", 3));
  record.ensured(requestFor("coco", 2));
  record.ensured(requestFor("old", 1));
  record.purged(requestFor("old", 0).dataset(), true);
  record.ensured(requestFor("coco", 1));  // again: keeps its place
  std::atomic<bool> asked = false;
  auto listener = HandoverListener::listen(socket_, kToken, [&] { asked = true; });
  ASSERT_TRUE(listener.isOk()) << listener.status();
  EXPECT_FALSE((*listener)->requested());
  std::jthread oldMain([&] {  // waits for the request, then releases
    testing::eventually([&] { return asked.load(); });
    (*listener)->release(record.serialized());
  });

  auto taken = takeOverNode(socket_, kToken);
  ASSERT_TRUE(taken.isOk()) << taken.status();
  ASSERT_TRUE(taken->has_value());
  EXPECT_TRUE((*listener)->requested());
  std::vector<std::string> names;
  for (const std::string& bytes : **taken) {
    v1::EnsureDatasetRequest request;
    ASSERT_TRUE(request.ParseFromString(bytes));
    names.push_back(request.dataset().name() + "/" +
                    std::to_string(request.dataset().generation()));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"coco/1", "imagenet/3", "coco/2"}));

  // A second successor is refused: the node was released already.
  const Status again = takeOverNode(socket_, kToken).status();
  EXPECT_EQ(again.code(), StatusCode::kUnavailable);
  EXPECT_NE(again.message().find("released already"), std::string::npos) << again;
  listener->reset();
  EXPECT_TRUE(std::filesystem::exists(socket_)) << "the successor's to listen at now";
}

TEST_F(HandoverTest, ARequestWithoutTheTokenIsRefusedAndReleasesNothing) {
  bool asked = false;
  auto listener = HandoverListener::listen(socket_, kToken, [&] { asked = true; });
  ASSERT_TRUE(listener.isOk());
  const Status refused = takeOverNode(socket_, Secret("guessed")).status();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("wrong token"), std::string::npos) << refused;
  EXPECT_FALSE(asked);
  EXPECT_FALSE((*listener)->requested());
  EXPECT_EQ(refused.message().find("node-token"), std::string::npos) << "no token in errors";
}

// A process of another protocol (a newer one, or anything else listening there) answers
// otherwise: the successor is told what it said and goes on without.
TEST_F(HandoverTest, AnotherProtocolIsNamedNotFollowed) {
  auto listening = unix_socket::listenAt(socket_);
  ASSERT_TRUE(listening.isOk());
  std::jthread other([&] {
    testing::eventually([&] {
      const OwnedFd connection = unix_socket::acceptFrom(listening->get(), std::chrono::seconds(2));
      if (connection.get() < 0) return false;
      std::string request;
      OwnedFd none;
      unix_socket::receiveMessage(connection.get(), request, none);
      unix_socket::sendMessage(connection.get(),
                               "unknown request: this node speaks "
                               "granary-handover/9");
      return true;
    });
  });
  const Status taken = takeOverNode(socket_, kToken).status();
  EXPECT_EQ(taken.code(), StatusCode::kUnavailable);
  EXPECT_NE(taken.message().find("granary-handover/9"), std::string::npos) << taken;
}

// The old node stops (its pod deleted) before it released the node: the successor hears so
// rather than waiting for ever.
TEST_F(HandoverTest, AnOldNodeStoppingBeforeItReleasedSaysSo) {
  std::atomic<bool> asked = false;
  auto listener = HandoverListener::listen(socket_, kToken, [&] { asked = true; });
  ASSERT_TRUE(listener.isOk());
  std::jthread stopper([&] {
    testing::eventually([&] { return asked.load(); });
    listener->reset();
  });
  const Status taken = takeOverNode(socket_, kToken).status();
  EXPECT_EQ(taken.code(), StatusCode::kUnavailable);
  EXPECT_NE(taken.message().find("stopped before it was released"), std::string::npos) << taken;
}

TEST_F(HandoverTest, AStateNoOneHoldsIsFree) {
  const auto state = socket_.parent_path() / "state";
  EXPECT_FALSE(stateHeldElsewhere(state));
}

}  // namespace
}  // namespace granary::cache
