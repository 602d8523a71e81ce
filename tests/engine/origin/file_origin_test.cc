#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/origin/beneath.h"
#include "engine/origin/make_origin.h"
#include "engine/origin/origin.h"

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

// Names that sort differently as names and as paths: "a-b" sorts before "a/x" ('-' < '/'), "a"
// before "a-b". The listing hands the paths over in byte order, as S3 does.
class FileOriginKeyOrderTest : public FileOriginTest {
 protected:
  void SetUp() override {
    FileOriginTest::SetUp();
    for (const char* dir : {"k/a", "k/a/x", "k/a.d", "k/b", "k/c", "k/c/e"})
      std::filesystem::create_directories(root_ / dir);
    for (const char* file : {"k/a-b", "k/a/x/1", "k/a/y", "k/a/x-", "k/a.d/2", "k/a0", "k/b/3",
                             "k/b/4", "k/c/e/5", "k/c/6", "k/d"})
      write(file, file);
    auto origin = makeFileOrigin((root_ / "k").string());
    ASSERT_TRUE(origin.isOk()) << origin.status();
    origin_ = std::move(*origin);
  }
  // The paths listRange hands over, in the order it does.
  std::vector<std::string> listed(const KeyRange& range) {
    std::vector<std::string> paths;
    const Status status = origin_->listRange(range, [&](std::vector<OriginObject>&& batch) {
      for (auto& o : batch) paths.push_back(o.path);
      return Status::ok();
    });
    EXPECT_TRUE(status.isOk()) << status;
    return paths;
  }

  const std::vector<std::string> all_ = {"a-b", "a.d/2", "a/x-", "a/x/1", "a/y", "a0",
                                         "b/3", "b/4",   "c/6",  "c/e/5", "d"};
  std::unique_ptr<Origin> origin_;
};

TEST_F(FileOriginKeyOrderTest, ListsInTheByteOrderOfPaths) {
  EXPECT_TRUE(origin_->listsInKeyOrder());
  EXPECT_EQ(listed({}), all_);
  std::vector<std::string> paths;
  ASSERT_TRUE(origin_
                  ->list([&](std::vector<OriginObject>&& batch) {
                    for (auto& o : batch) paths.push_back(o.path);
                    return Status::ok();
                  })
                  .isOk());
  EXPECT_EQ(paths, all_) << "list() is listRange() of the whole key order";
}

TEST_F(FileOriginKeyOrderTest, ListsARangeOnlyWhereItStartsAndEnds) {
  // Every (after, through] cut at a listed path, a directory's prefix or between: exactly the
  // paths within, in order.
  std::vector<std::string> cuts = {"",   "a",   "a/",   "a/x",   "a/x/", "a/x/1", "a0",
                                   "b/", "b/3", "c/e/", "c/e/5", "d",    "e"};
  for (const auto& after : cuts) {
    for (const auto& through : cuts) {
      const KeyRange range{.after = after, .through = through};
      std::vector<std::string> expected;
      std::copy_if(all_.begin(), all_.end(), std::back_inserter(expected),
                   [&](const std::string& path) { return range.contains(path); });
      EXPECT_EQ(listed(range), expected) << range;
    }
  }
}

TEST_F(FileOriginKeyOrderTest, SplitsAtTopLevelDirectoriesCoveringEveryPath) {
  for (size_t parts : {1u, 2u, 3u, 8u}) {
    auto ranges = origin_->split(parts);
    ASSERT_TRUE(ranges.isOk()) << ranges.status();
    EXPECT_LE(ranges->size(), parts);
    std::vector<std::string> paths;
    for (const KeyRange& range : *ranges)
      for (auto& path : listed(range)) paths.push_back(path);
    EXPECT_EQ(paths, all_) << parts << " parts: each path once, in order";
  }
  EXPECT_EQ(origin_->split(3)->size(), 3u) << "four top-level directories give three parts";
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

// file:// sources read only beneath the roots the node allows: a base directory
// holding a root (data), a sibling whose name shares its prefix (data2) and files outside both
// whose bytes must never be served.
class FileOriginRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::filesystem::temp_directory_path() /
            ("granary-origin-roots-" + std::to_string(::getpid()));
    std::filesystem::remove_all(base_);
    root_ = base_ / "data";
    for (const auto& dir : {root_ / "ds" / "sub", base_ / "data2" / "ds", outside_() / "sub"})
      std::filesystem::create_directories(dir);
    write(root_ / "ds" / "a.bin", "inside-a");
    write(root_ / "ds" / "sub" / "b.bin", "inside-b");
    write(base_ / "data2" / "ds" / "a.bin", "sibling");
    write(outside_() / "a.bin", "OUTSIDE");
    write(outside_() / "sub" / "b.bin", "OUTSIDE!");  // as long as inside-b
  }
  void TearDown() override { std::filesystem::remove_all(base_); }

  std::filesystem::path outside_() const { return base_ / "outside"; }
  static void write(const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  static std::string uriOf(const std::filesystem::path& path) {
    return "file://" + path.string() + "/";
  }
  Result<std::unique_ptr<Origin>> open(const std::string& uri) const {
    return makeOrigin(SourceSpec{.uri = uri}, OriginSettings{.fileOriginRoots = {root_}});
  }
  // Refused as outside the roots, with the setting named and the roots listed.
  void expectOutside(const std::string& uri) const {
    auto origin = open(uri);
    ASSERT_FALSE(origin.isOk()) << uri << " was accepted";
    EXPECT_EQ(origin.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(origin.status().message().find("uri: " + uri +
                                             " is outside the cache node's "
                                             "fileOriginRoots (" +
                                             root_.string() + ")"),
              std::string::npos)
        << origin.status();
  }
  static std::vector<OriginObject> listAll(Origin& origin) {
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
  static std::vector<std::string> pathsOf(const std::vector<OriginObject>& objects) {
    std::vector<std::string> paths;
    for (const auto& o : objects) paths.push_back(o.path);
    return paths;
  }
  // Gives `path` the size and modification time of `like`, so that the version a listing took
  // of `like` matches it too.
  static void sameVersion(const std::filesystem::path& path, const std::filesystem::path& like) {
    struct stat st {};
    ASSERT_EQ(::stat(like.c_str(), &st), 0);
    ASSERT_EQ(std::filesystem::file_size(path), static_cast<uintmax_t>(st.st_size));
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  }

  std::filesystem::path base_;
  std::filesystem::path root_;
};

TEST_F(FileOriginRootsTest, ListsAndReadsASourceWithinARoot) {
  for (const std::string& uri : {uriOf(root_ / "ds"), uriOf(root_), "file://" + root_.string()}) {
    auto origin = open(uri);
    ASSERT_TRUE(origin.isOk()) << uri << ": " << origin.status();
  }
  auto origin = open(uriOf(root_ / "ds"));
  const auto all = listAll(**origin);
  EXPECT_EQ(pathsOf(all), (std::vector<std::string>{"a.bin", "sub/b.bin"}));
  EXPECT_EQ(*(*origin)->read("sub/b.bin", 0, 100, all[1].etag), "inside-b");
}

TEST_F(FileOriginRootsTest, RefusesEveryFileSourceWhenNoRootIsConfigured) {
  auto origin = makeOrigin(SourceSpec{.uri = uriOf(root_ / "ds")}, OriginSettings{});
  ASSERT_FALSE(origin.isOk());
  EXPECT_EQ(origin.status().code(), StatusCode::kInvalidArgument);
  const std::string message = origin.status().message();
  EXPECT_TRUE(message.starts_with("uri: " + uriOf(root_ / "ds"))) << message;
  EXPECT_NE(message.find("fileOriginRoots"), std::string::npos) << message;
  EXPECT_NE(message.find("cacheNode.fileOriginRoots"), std::string::npos) << message;
}

// A directory within a root that is not there yet is a source to wait for, not a bad spec: its
// listing is Unavailable, saying so, until it appears; then it lists what it holds.
TEST_F(FileOriginRootsTest, ADirectoryNotThereYetIsAwaited) {
  const auto later = root_ / "later" / "coco";
  auto origin = open(uriOf(later));
  ASSERT_TRUE(origin.isOk()) << origin.status();
  std::vector<OriginObject> all;
  const auto collect = [&](std::vector<OriginObject>&& batch) {
    for (auto& object : batch) all.push_back(std::move(object));
    return Status::ok();
  };
  const Status missing = (*origin)->list(collect);
  EXPECT_EQ(missing.code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.message().find(later.string() + " does not exist on this node"),
            std::string::npos)
      << missing;
  std::filesystem::create_directories(later);
  write(later / "a.bin", "later-a");
  ASSERT_TRUE((*origin)->list(collect).isOk());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(*(*origin)->read("a.bin", 0, 100, all[0].etag), "later-a");
  // A file where the directory should be can never be a source.
  EXPECT_EQ(open(uriOf(root_ / "ds" / "a.bin")).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(FileOriginRootsTest, RefusesDotDotOutOfARoot) {
  expectOutside("file://" + (root_ / "ds" / ".." / ".." / "outside").string() + "/");
  expectOutside("file://" + (root_ / ".." / "data2" / "ds").string() + "/");
  expectOutside("file://" + root_.string() + "/..");
}

TEST_F(FileOriginRootsTest, RefusesASiblingThatSharesTheRootsPrefix) {
  expectOutside(uriOf(base_ / "data2" / "ds"));
  expectOutside(uriOf(base_ / "data2"));
}

TEST_F(FileOriginRootsTest, RefusesASymlinkToTheHostRootInsideARoot) {
  std::filesystem::create_directory_symlink("/", root_ / "up");
  expectOutside(uriOf(root_ / "up"));
  expectOutside(uriOf(root_ / "up" / outside_().relative_path()));
  expectOutside(uriOf(root_ / "up" / "etc"));
}

TEST_F(FileOriginRootsTest, RefusesProcSelfRoot) {
  expectOutside(uriOf(std::filesystem::path("/proc/self/root") / outside_().relative_path()));
  expectOutside("file:///proc/self/root/");
  std::filesystem::create_directory_symlink("/proc/self/root", root_ / "host");
  expectOutside(uriOf(root_ / "host" / outside_().relative_path()));
}

TEST_F(FileOriginRootsTest, NeverListsOrReadsAFileSymlinkLeadingOut) {
  std::filesystem::create_symlink(outside_() / "a.bin", root_ / "ds" / "absolute");
  std::filesystem::create_symlink("../../outside/a.bin", root_ / "ds" / "relative");
  std::filesystem::create_symlink("/proc/self/root" + (outside_() / "a.bin").string(),
                                  root_ / "ds" / "host");
  std::filesystem::create_symlink("../ds/a.bin", root_ / "ds" / "within");  // stays beneath
  auto origin = open(uriOf(root_ / "ds"));
  ASSERT_TRUE(origin.isOk()) << origin.status();
  EXPECT_EQ(pathsOf(listAll(**origin)), (std::vector<std::string>{"a.bin", "sub/b.bin", "within"}));
  EXPECT_EQ(*(*origin)->read("within", 0, 100, ""), "inside-a");
  for (const std::string& path :
       std::vector<std::string>{"absolute", "relative", "host", "../../outside/a.bin",
                                "sub/../../../outside/a.bin", (outside_() / "a.bin").string()}) {
    auto read = (*origin)->read(path, 0, 100, "");
    EXPECT_FALSE(read.isOk()) << path << " served " << *read;
  }
}

TEST_F(FileOriginRootsTest, AComponentSwappedForASymlinkAfterTheCheckLeadsNowhereOutside) {
  auto origin = open(uriOf(root_ / "ds"));
  ASSERT_TRUE(origin.isOk()) << origin.status();
  const auto listed = listAll(**origin);
  ASSERT_EQ(pathsOf(listed), (std::vector<std::string>{"a.bin", "sub/b.bin"}));

  // A directory of the source becomes a symlink out, to a file of the listed version.
  sameVersion(outside_() / "sub" / "b.bin", root_ / "ds" / "sub" / "b.bin");
  std::filesystem::rename(root_ / "ds" / "sub", root_ / "sub.moved");
  std::filesystem::create_directory_symlink(outside_() / "sub", root_ / "ds" / "sub");
  for (const std::string& etag : {listed[1].etag, std::string()}) {
    auto read = (*origin)->read("sub/b.bin", 0, 100, etag);
    EXPECT_FALSE(read.isOk()) << "served " << *read;
  }
  std::filesystem::remove(root_ / "ds" / "sub");
  std::filesystem::create_directory_symlink("../../outside/sub", root_ / "ds" / "sub");
  EXPECT_FALSE((*origin)->read("sub/b.bin", 0, 100, listed[1].etag).isOk());

  // The source directory itself becomes one.
  std::filesystem::rename(root_ / "ds", root_ / "ds.moved");
  std::filesystem::create_directory_symlink(outside_(), root_ / "ds");
  auto read = (*origin)->read("a.bin", 0, 100, "");
  EXPECT_FALSE(read.isOk()) << "served " << *read;
  std::vector<OriginObject> relisted;
  (void)(*origin)->list([&](std::vector<OriginObject>&& batch) {
    for (auto& o : batch) relisted.push_back(std::move(o));
    return Status::ok();
  });
  EXPECT_TRUE(relisted.empty()) << "listed " << relisted.size() << " files outside the root";

  // A symlink that stays beneath the root is still followed.
  std::filesystem::remove(root_ / "ds");
  std::filesystem::create_directory_symlink("ds.moved", root_ / "ds");
  EXPECT_EQ(*(*origin)->read("a.bin", 0, 100, ""), "inside-a");
}

// A claim is not an origin the node can reach: pvc:// is refused like any unknown scheme.
TEST(MakeOriginTest, RefusesPvcSources) {
  auto origin = makeOrigin(SourceSpec{.uri = "pvc://claim/data/"});
  ASSERT_FALSE(origin.isOk());
  EXPECT_EQ(origin.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(origin.status().message().find("not a supported scheme"), std::string::npos)
      << origin.status();
}

TEST(IsWithinTest, ComparesWholeComponents) {
  EXPECT_TRUE(isWithin("/srv/data", "/srv/data"));
  EXPECT_TRUE(isWithin("/srv/data/x/y", "/srv/data"));
  EXPECT_TRUE(isWithin("/srv/data/x", "/srv/data/"));
  EXPECT_TRUE(isWithin("/etc", "/"));
  EXPECT_FALSE(isWithin("/srv/data2", "/srv/data"));
  EXPECT_FALSE(isWithin("/srv/dat", "/srv/data"));
  EXPECT_FALSE(isWithin("/srv", "/srv/data"));
  EXPECT_FALSE(isWithin("/etc", "/srv/data"));
}

TEST(IsPlainRelativePathTest, RefusesWhatCouldClimbOrIsNotAName) {
  EXPECT_TRUE(isPlainRelativePath("a"));
  EXPECT_TRUE(isPlainRelativePath("a/b.c/..d"));
  for (const std::string path : {"", "/a", "a/", "a//b", "./a", "a/.", "..", "a/../b", "x/.."})
    EXPECT_FALSE(isPlainRelativePath(path)) << path;
  EXPECT_FALSE(isPlainRelativePath(std::string("a\0b", 3)));
}

// openBeneath() through the kernel's openat2 and through the component-by-component walk: the
// same answers.
class OpenBeneathTest : public ::testing::TestWithParam<BeneathResolver> {
 protected:
  void SetUp() override {
    if (GetParam() == BeneathResolver::kKernel && !kernelResolvesBeneath())
      GTEST_SKIP() << "this kernel has no openat2";
    base_ =
        std::filesystem::temp_directory_path() / ("granary-beneath-" + std::to_string(::getpid()));
    std::filesystem::remove_all(base_);
    std::filesystem::create_directories(base_ / "root" / "dir");
    std::filesystem::create_directories(base_ / "outside");
    std::ofstream(base_ / "root" / "dir" / "file") << "inside";
    std::ofstream(base_ / "outside" / "file") << "OUTSIDE";
    rootFd_ = ::open((base_ / "root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(rootFd_, 0);
  }
  void TearDown() override {
    if (rootFd_ >= 0) ::close(rootFd_);
    std::filesystem::remove_all(base_);
  }
  void link(const std::string& target, const std::string& at) const {
    std::filesystem::create_symlink(target, base_ / "root" / at);
  }
  // What `path` opens to, read whole: the bytes, or "errno <n>".
  std::string open(const std::string& path, int dirFd = -1) const {
    const int fd = openBeneath(dirFd < 0 ? rootFd_ : dirFd, path, O_RDONLY, GetParam());
    if (fd < 0) return "errno " + std::to_string(-fd);
    char buffer[64];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    ::close(fd);
    return n < 0 ? "read error" : std::string(buffer, static_cast<size_t>(n));
  }
  static std::string errnoText(int error) { return "errno " + std::to_string(error); }

  std::filesystem::path base_;
  int rootFd_ = -1;
};

TEST_P(OpenBeneathTest, OpensWhatIsBeneathAndFollowsSymlinksThatStayThere) {
  EXPECT_EQ(open("dir/file"), "inside");
  EXPECT_EQ(open("dir/../dir/./file"), "inside");
  link("dir/file", "direct");
  link("../dir/file", "dir/up-and-back");
  link("dir", "dirlink");
  EXPECT_EQ(open("direct"), "inside");
  EXPECT_EQ(open("dir/up-and-back"), "inside");
  EXPECT_EQ(open("dirlink/file"), "inside");
  EXPECT_EQ(open("nothing"), errnoText(ENOENT));
  EXPECT_EQ(open("dir/file/x"), errnoText(ENOTDIR));
  const int dir = openBeneath(rootFd_, "", O_RDONLY | O_DIRECTORY, GetParam());
  EXPECT_GE(dir, 0);
  if (dir >= 0) ::close(dir);
}

TEST_P(OpenBeneathTest, RefusesEveryWayOut) {
  EXPECT_EQ(open("../outside/file"), errnoText(EXDEV));
  EXPECT_EQ(open("dir/../../outside/file"), errnoText(EXDEV));
  link((base_ / "outside" / "file").string(), "absolute");
  link("../outside/file", "relative");
  link("../../outside", "dir/climb");
  link("/", "host");
  EXPECT_EQ(open("absolute"), errnoText(EXDEV));
  EXPECT_EQ(open("relative"), errnoText(EXDEV));
  EXPECT_EQ(open("dir/climb/file"), errnoText(EXDEV));
  EXPECT_EQ(open("host" + (base_ / "outside" / "file").string()), errnoText(EXDEV));
  link("loop", "loop");
  EXPECT_EQ(open("loop"), errnoText(ELOOP));
}

TEST_P(OpenBeneathTest, RefusesProcMagicLinks) {
  const int proc = ::open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(proc, 0);
  const std::string out = open("root" + (base_ / "outside" / "file").string(), proc);
  ::close(proc);
  EXPECT_TRUE(out == errnoText(ELOOP) || out == errnoText(EXDEV)) << out;
}

TEST_P(OpenBeneathTest, AComponentSwappedForASymlinkOutIsRefused) {
  EXPECT_EQ(open("dir/file"), "inside");
  std::filesystem::rename(base_ / "root" / "dir", base_ / "root" / "dir.moved");
  link((base_ / "outside").string(), "dir");
  EXPECT_EQ(open("dir/file"), errnoText(EXDEV));
  std::filesystem::remove(base_ / "root" / "dir");
  link("../outside", "dir");
  EXPECT_EQ(open("dir/file"), errnoText(EXDEV));
  std::filesystem::remove(base_ / "root" / "dir");
  link("dir.moved", "dir");
  EXPECT_EQ(open("dir/file"), "inside");
}

INSTANTIATE_TEST_SUITE_P(Resolvers, OpenBeneathTest,
                         ::testing::Values(BeneathResolver::kKernel, BeneathResolver::kWalk),
                         [](const auto& param) {
                           return param.param == BeneathResolver::kKernel ? "Kernel" : "Walk";
                         });

}  // namespace
}  // namespace granary::cache
