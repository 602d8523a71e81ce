#include "common/files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace granary {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("granary_files_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& content) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  }

  std::filesystem::path dir_;
};

TEST_F(FilesTest, ReadsWholeFilesByteForByte) {
  const std::string content("line one\n\0binary\r\n", 18);
  auto read = readTextFile(write("pem", content));
  ASSERT_TRUE(read.isOk()) << read.status();
  EXPECT_EQ(*read, content);
  EXPECT_EQ(readTextFile((dir_ / "missing").string()).status().code(), StatusCode::kNotFound);
}

TEST_F(FilesTest, SecretFilesAreTrimmedAndNeverEchoed) {
  auto token = readSecretFile(write("token", "  s3cr3t-t0ken\r\n\n"));
  ASSERT_TRUE(token.isOk()) << token.status();
  EXPECT_EQ(token->reveal(), "s3cr3t-t0ken");
  std::ostringstream printed;
  printed << *token;
  EXPECT_EQ(printed.str(), "<redacted>");

  const std::string empty = write("empty", " \n\t\r\n");
  const Status blank = readSecretFile(empty).status();
  EXPECT_EQ(blank.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(blank.message().find(empty), std::string::npos) << blank;

  const Status missing = readSecretFile((dir_ / "missing").string()).status();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("missing"), std::string::npos) << missing;
}

}  // namespace
}  // namespace granary
