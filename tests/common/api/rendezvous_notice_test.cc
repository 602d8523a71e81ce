#include "common/api/rendezvous_notice.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/api/training_job.h"
#include "tests/support/child_process.h"
#include "tests/support/eventually.h"
#include "tests/support/free_port.h"
#include "tests/support/http_get.h"

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
  const Status told = sendRendezvousNotice(address, "rendezvous x\npid 1\n", "t0ken-not-logged");
  EXPECT_EQ(told.code(), StatusCode::kUnavailable);
  EXPECT_NE(told.message().find(address), std::string::npos) << told.message();
  EXPECT_EQ(told.message().find("t0ken-not-logged"), std::string::npos) << told.message();
}

TEST(RendezvousNotice, AJobsTokenIsTheSameForTheSameKeyAndJobAndNoOtherwise) {
  const std::string token = rendezvousNoticeToken("operator key", "uid-1");
  EXPECT_EQ(token.size(), 64u) << "hex SHA-256";
  EXPECT_EQ(token, rendezvousNoticeToken("operator key", "uid-1"));
  EXPECT_NE(token, rendezvousNoticeToken("operator key", "uid-2"));
  EXPECT_NE(token, rendezvousNoticeToken("another key", "uid-1"));
  EXPECT_EQ(token.find("operator key"), std::string::npos);
  EXPECT_EQ(rendezvousNoticeToken("", "uid-1"), "") << "no key, no token";
  EXPECT_EQ(randomRendezvousToken().size(), 64u);
  EXPECT_NE(randomRendezvousToken(), randomRendezvousToken());
}

// The store's notice port with a stand-in for torch (tests/common/api/fake_torch: TCPStore over
// files, so that the rendezvous state is read from outside): notices without the job's token, or
// with another, are refused (403) and let no agent go; the token's notice lets its agent go at
// once; the store counts both on GET /metrics.
TEST(RendezvousNotice, TheStoreTakesOnlyNoticesWithItsJobsTokenAndCountsTheRefused) {
  const char* root = std::getenv("GRANARY_SOURCE_DIR");
  if (!root) GTEST_SKIP() << "GRANARY_SOURCE_DIR is not set (ctest sets it)";
  const std::string fakeTorch = std::string(root) + "/tests/common/api/fake_torch";
  const auto dir = std::filesystem::temp_directory_path() /
                   ("granary-rendezvous-token-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "store");
  const std::map<std::string, std::string> env = {{"PYTHONPATH", fakeTorch},
                                                  {"GRANARY_FAKE_TCPSTORE", (dir / "store").string()},
                                                  {kRendezvousTokenEnv, "the-jobs-token"}};
  const auto python = [&](const std::string& code) {
    std::string command = "cd " + (dir / "store").string() + " && ";
    for (const auto& [name, value] : env) command += name + "='" + value + "' ";
    return std::system((command + "/usr/bin/python3 -c '" + code + "' > " +
                        (dir / "let-go").string())
                           .c_str());
  };
  ASSERT_EQ(python("from torch.distributed import write_state; "
                   "write_state(\"uid-0\", [\"w-0\", \"w-1\"])"),
            0);
  const auto letGo = [&] {
    EXPECT_EQ(python("from torch.distributed import let_go; print(\" \".join(let_go(\"uid-0\")))"),
              0);
    std::ifstream in(dir / "let-go");
    std::string line;
    std::getline(in, line);
    return line;
  };
  ASSERT_EQ(letGo(), "");

  const int port = testing::freePort(), noticePort = testing::freePort();
  std::vector<std::string> argv = rendezvousStoreCommand(port, noticePort);
  argv.front() = "/usr/bin/python3";
  testing::ChildProcess store(argv, dir / "store.log", env);
  store.start();
  const std::string address = "127.0.0.1:" + std::to_string(noticePort);
  const std::string forged = rendezvousNotice("uid-0", {{.host = "w-1"}});
  Status refused = unavailable("not tried");
  ASSERT_TRUE(testing::eventually(  // the store answers once it listens
      [&] {
        refused = sendRendezvousNotice(address, forged, "");
        return refused.message().find("answered") != std::string::npos || !store.running();
      },
      std::chrono::seconds(30)))
      << refused << "\n" << store.log();
  EXPECT_NE(refused.message().find("answered 403"), std::string::npos) << refused;
  const Status wrong = sendRendezvousNotice(address, forged, "a-guess");
  EXPECT_NE(wrong.message().find("answered 403"), std::string::npos) << wrong;

  // The job's notice, after the forged ones: once its agent is let go, the store has acted on
  // every notice before it, so w-1 still beating shows the forged ones changed nothing.
  const Status told =
      sendRendezvousNotice(address, rendezvousNotice("uid-0", {{.host = "w-0"}}), "the-jobs-token");
  ASSERT_TRUE(told.isOk()) << told << "\n" << store.log();
  ASSERT_TRUE(testing::eventually([&] { return letGo() == "w-0"; }, std::chrono::seconds(10)))
      << letGo() << "\n" << store.log();
  EXPECT_EQ(letGo(), "w-0") << "the forged notices let w-1 go";

  std::string metrics;
  ASSERT_EQ(testing::httpGet("http://" + address + "/metrics", metrics), 200);
  EXPECT_NE(metrics.find("granary_rendezvous_notices_total 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("granary_rendezvous_notices_refused_total{reason=\"token\"} 2\n"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(store.log().find("the-jobs-token"), std::string::npos) << "the token is never logged";
  store.stop();
  std::filesystem::remove_all(dir);
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
  testing::ChildProcess store(argv, log, {{kRendezvousTokenEnv, "the-jobs-token"}});
  store.start();
  const std::string address = "127.0.0.1:" + std::to_string(noticePort);
  Status told = unavailable("not tried");
  EXPECT_TRUE(testing::eventually(
      [&] {
        told = sendRendezvousNotice(address, rendezvousNotice("uid-0", {{.host = "w-1"}}),
                                    "the-jobs-token");
        return told.isOk() || !store.running();
      },
      std::chrono::seconds(60)))
      << told;
  EXPECT_TRUE(told.isOk()) << told << "\n" << store.log();
  const Status refused = sendRendezvousNotice(address, "pid 7\n", "the-jobs-token");
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("400"), std::string::npos) << refused.message();
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace granary::api
