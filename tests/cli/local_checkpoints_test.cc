// Local mode's checkpoint volume against s3rver, as `granaryctl run` opens it: credentials from
// the environment (secretRef), the tree linked at the workers' path, drained before the run ends,
// and restored on another machine (another cache directory) byte for byte.
#include "cli/local_checkpoints.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "tests/support/s3rver.h"
#include "tests/support/scratch_tree.h"

namespace granary::cli {
namespace {

namespace fs = std::filesystem;

std::string randomBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class LocalCheckpointsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { s3_.start(GRANARY_SOURCE_DIR); }
  static void TearDownTestSuite() { s3_.stop(); }
  void SetUp() override {
    if (!s3_.skip.empty()) GTEST_SKIP() << s3_.skip;
    ASSERT_NE(s3_.server, nullptr) << s3_.error;
    root_ = fs::temp_directory_path() / ("granary-local-checkpoints-" + std::to_string(::getpid()));
    testing::removeTree(root_);
    ::setenv("AWS_ACCESS_KEY_ID", "S3RVER", 1);  // s3rver's built-in account
    ::setenv("AWS_SECRET_ACCESS_KEY", "S3RVER", 1);
  }
  void TearDown() override {
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    testing::removeTree(root_);
  }

  LocalCheckpoints checkpoints(const std::string& machine) const {
    api::CheckpointVolume volume;
    volume.source = {
        .uri = uri_, .endpoint = s3_.server->endpoint(), .secretRef = api::SecretRef{"creds"}};
    volume.mountPath = "/ckpt";
    return {volume, root_ / machine / "run" / "ckpt"};
  }

  Result<std::unique_ptr<LocalCheckpointVolume>> open(const std::string& machine) {
    std::stop_source stop;
    return LocalCheckpointVolume::open(checkpoints(machine), root_ / machine / "cache", realClock(),
                                       stop.get_token(),
                                       [this](const std::string& line) { said_.push_back(line); });
  }

  fs::path root_;
  std::string uri_ = "s3://data/runs/local/";
  std::vector<std::string> said_;
  static inline cache::SuiteS3rver s3_;
};

TEST_F(LocalCheckpointsTest, ASaveDrainsToS3AndAnotherMachineRestoresIt) {
  const std::string shard = randomBytes(20 << 20, 1);  // above the multipart threshold
  {
    auto volume = open("node-1");
    ASSERT_TRUE(volume.isOk()) << volume.status();
    const fs::path at = checkpoints("node-1").localPath;
    ASSERT_TRUE(fs::is_symlink(at)) << "the workers' path links to the tree";
    fs::create_directories(at / "step-1");
    std::ofstream(at / "step-1" / "__0_0.distcp", std::ios::binary) << shard;
    std::ofstream(at / "step-1" / ".metadata.tmp") << "step 1";
    fs::rename(at / "step-1" / ".metadata.tmp", at / "step-1" / ".metadata");
    std::stop_source stop;
    ASSERT_TRUE((*volume)->drain(stop.get_token(), [](const std::string&) {}));
    EXPECT_NE((*volume)->progressLine().find("2 files, all at the origin"), std::string::npos)
        << (*volume)->progressLine();
  }
  said_.clear();
  auto volume = open("node-2");
  ASSERT_TRUE(volume.isOk()) << volume.status();
  ASSERT_FALSE(said_.empty());
  EXPECT_NE(said_.back().find("2 files (20.0Mi) restored from s3://data/runs/local/"),
            std::string::npos)
      << said_.back();
  const fs::path at = checkpoints("node-2").localPath;
  EXPECT_EQ(readFile(at / "step-1" / "__0_0.distcp"), shard);
  EXPECT_EQ(readFile(at / "step-1" / ".metadata"), "step 1");
  EXPECT_FALSE(fs::exists(at / "step-1" / ".metadata.tmp"));
}

TEST_F(LocalCheckpointsTest, MissingCredentialsAreNamedBeforeAnythingStarts) {
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  auto volume = open("node-1");
  ASSERT_FALSE(volume.isOk());
  EXPECT_NE(volume.status().toString().find("AWS_SECRET_ACCESS_KEY"), std::string::npos)
      << volume.status();
}

// A full disk under the cache directory (a 32 MiB tmpfs, below any margin): once drained, the
// checkpoints go from the local tree, saying so, and stay at the origin.
TEST_F(LocalCheckpointsTest, AFullDiskDropsWhatTheOriginHoldsSayingSo) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  uri_ = "s3://data/runs/full-disk-" + std::to_string(::getpid()) + "/";  // nothing there yet
  const fs::path cache = root_ / "node-1" / "cache";
  fs::create_directories(cache);
  ASSERT_EQ(::mount("tmpfs", cache.c_str(), "tmpfs", 0, "size=32m"), 0) << std::strerror(errno);
  const std::string shard = randomBytes(8 << 20, 2);
  {
    auto volume = open("node-1");
    ASSERT_TRUE(volume.isOk()) << volume.status();
    const fs::path at = checkpoints("node-1").localPath;
    fs::create_directories(at / "step-1");
    std::ofstream(at / "step-1" / "__0_0.distcp", std::ios::binary) << shard;
    std::stop_source stop;
    ASSERT_TRUE((*volume)->drain(stop.get_token(), [](const std::string&) {}));
    said_.clear();
    (*volume)->makeRoom([this](const std::string& line) { said_.push_back(line); });
    ASSERT_EQ(said_.size(), 1u);
    EXPECT_NE(said_[0].find("; dropped 8Mi of checkpoints the origin holds"), std::string::npos)
        << said_[0];
    EXPECT_FALSE(fs::exists(at / "step-1" / "__0_0.distcp"));
  }
  said_.clear();
  auto again = open("node-2");  // another machine: every byte comes back from the origin
  ASSERT_TRUE(again.isOk()) << again.status();
  EXPECT_EQ(readFile(checkpoints("node-2").localPath / "step-1" / "__0_0.distcp"), shard);
}

}  // namespace
}  // namespace granary::cli
