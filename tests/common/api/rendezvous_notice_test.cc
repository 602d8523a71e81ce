#include "common/api/rendezvous_notice.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "common/api/training_job.h"
#include "tests/support/child_process.h"
#include "tests/support/eventually.h"
#include "tests/support/free_port.h"

namespace granary::api {
namespace {

TEST(RendezvousNotice, NamesTheRendezvousThenEachAgentOnALineOfItsOwn) {
  EXPECT_EQ(
      rendezvousNotice(
          "uid-2", {{.host = "bert-worker-1"}, {.pid = 42}, {.host = "bert-worker-3", .pid = 7}}),
      "rendezvous uid-2\nhost bert-worker-1\npid 42\nhost bert-worker-3 pid 7\n");
}

TEST(RendezvousNotice, AStoreThatIsNotThereIsUnavailableNamingIt) {
  const std::string address = "127.0.0.1:" + std::to_string(testing::freePort());
  const Status told = sendRendezvousNotice(address, "rendezvous x\npid 1\n");
  EXPECT_EQ(told.code(), StatusCode::kUnavailable);
  EXPECT_NE(told.message().find(address), std::string::npos) << told.message();
}

// The store as a job runs it (python3 with torch): a notice it understands is taken (204), one it
// does not is refused (400) with what it expects.
TEST(RendezvousNotice, TheStoreTakesNoticesAndRefusesWhatItCannotRead) {
  if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch (apt-get install python3-torch)";
  const int port = testing::freePort(), noticePort = testing::freePort();
  std::vector<std::string> argv = rendezvousStoreCommand(port, noticePort);
  argv.front() = "/usr/bin/python3";
  const auto log = std::filesystem::temp_directory_path() /
                   ("granary-rendezvous-" + std::to_string(::getpid()) + ".log");
  testing::ChildProcess store(argv, log);
  store.start();
  const std::string address = "127.0.0.1:" + std::to_string(noticePort);
  Status told = unavailable("not tried");
  EXPECT_TRUE(testing::eventually(
      [&] {
        told = sendRendezvousNotice(address, rendezvousNotice("uid-0", {{.host = "w-1"}}));
        return told.isOk() || !store.running();
      },
      std::chrono::seconds(60)))
      << told;
  EXPECT_TRUE(told.isOk()) << told << "\n" << store.log();
  const Status refused = sendRendezvousNotice(address, "pid 7\n");
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("400"), std::string::npos) << refused.message();
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace granary::api
