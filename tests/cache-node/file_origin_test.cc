#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cache-node/origin/origin.h"

namespace granary::cache {
namespace {

class FileOriginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        std::filesystem::temp_directory_path() / ("granary-origin-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "train" / "a");
    write("train/a/1.bin", "0123456789");
    write("train/2.bin", "abc");
    write("labels.csv", "x,y\n");
    std::filesystem::create_directory_symlink(root_ / "train", root_ / "loop");  // not followed
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void write(const std::string& path, const std::string& text) {
    std::ofstream out(root_ / path, std::ios::binary);
    out << text;
  }

  std::vector<OriginObject> listAll(Origin& origin) {
    std::vector<OriginObject> all;
    EXPECT_TRUE(origin
                    .list([&](std::vector<OriginObject>&& batch) {
                      for (auto& o : batch) all.push_back(std::move(o));
                      return Status::ok();
                    })
                    .isOk());
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    return all;
  }

  std::filesystem::path root_;
};

TEST_F(FileOriginTest, ListsEveryFileWithSizeAndVersion) {
  auto origin = makeFileOrigin(root_.string());
  ASSERT_TRUE(origin.isOk()) << origin.status();
  const auto all = listAll(**origin);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].path, "labels.csv");
  EXPECT_EQ(all[1].path, "train/2.bin");
  EXPECT_EQ(all[2].path, "train/a/1.bin");
  EXPECT_EQ(all[2].size, 10);
  EXPECT_FALSE(all[2].etag.empty());
}

TEST_F(FileOriginTest, ReadsRangesAtTheListedVersion) {
  auto origin = makeFileOrigin(root_.string());
  ASSERT_TRUE(origin.isOk());
  const auto all = listAll(**origin);
  const auto& file = all[2];
  EXPECT_EQ(*(*origin)->read(file.path, 2, 5, file.etag), "23456");
  EXPECT_EQ(*(*origin)->read(file.path, 8, 100, file.etag), "89") << "short only at the end";
  EXPECT_EQ(*(*origin)->read(file.path, 10, 5, file.etag), "");
}

TEST_F(FileOriginTest, NoticesAFileChangedAtTheOrigin) {
  auto origin = makeFileOrigin(root_.string());
  ASSERT_TRUE(origin.isOk());
  const auto file = listAll(**origin)[2];
  write("train/a/1.bin", "a different, longer content");
  EXPECT_EQ((*origin)->read(file.path, 0, 4, file.etag).status().code(),
            StatusCode::kFailedPrecondition);
  std::filesystem::remove(root_ / "train/a/1.bin");
  EXPECT_EQ((*origin)->read(file.path, 0, 4, file.etag).status().code(), StatusCode::kNotFound);
}

TEST_F(FileOriginTest, RefusesARootThatIsNotADirectory) {
  auto origin = makeFileOrigin((root_ / "labels.csv").string());
  EXPECT_EQ(origin.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(origin.status().message().find("is not a directory"), std::string::npos);
}

}  // namespace
}  // namespace granary::cache
