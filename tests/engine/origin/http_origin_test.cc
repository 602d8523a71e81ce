// The http(s) origin against a real web server on loopback (civetweb: directory listings,
// Range, ETag), with injected 5xx, truncated bodies and files changed at the origin.
#include "engine/origin/http_origin.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/support/http_file_server.h"

namespace granary::cache {
namespace {

class HttpOriginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("granary-http-" + std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "train" / "deep-dir");
    write("train/a.bin", std::string(100000, 'a'));
    write("train/deep-dir/b c.bin", "0123456789");
    write("labels.csv", "x,y\n");
    auto server = testing::HttpFileServer::start(root_);
    ASSERT_TRUE(server.isOk()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(root_);
  }
  void write(const std::string& path, const std::string& text) {
    std::ofstream out(root_ / path, std::ios::binary);
    out << text;
  }
  std::unique_ptr<Origin> origin(const std::string& index = "") {
    auto o = makeHttpOrigin(
        {.baseUrl = server_->url(), .index = index, .retryDelay = std::chrono::milliseconds(1)});
    EXPECT_TRUE(o.isOk()) << o.status();
    return o.isOk() ? std::move(*o) : nullptr;
  }
  static std::vector<OriginObject> listAll(Origin& origin) {
    std::vector<OriginObject> all;
    const Status s = origin.list([&](std::vector<OriginObject>&& batch) {
      for (auto& o : batch) all.push_back(std::move(o));
      return Status::ok();
    });
    EXPECT_TRUE(s.isOk()) << s;
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
    return all;
  }

  std::filesystem::path root_;
  std::unique_ptr<testing::HttpFileServer> server_;
};

TEST_F(HttpOriginTest, CrawlsTheDirectoryListing) {
  auto o = origin();
  const auto all = listAll(*o);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].path, "labels.csv");
  EXPECT_EQ(all[1].path, "train/a.bin");
  EXPECT_EQ(all[1].size, 100000);
  EXPECT_EQ(all[2].path, "train/deep-dir/b c.bin");
  EXPECT_FALSE(all[2].etag.empty());
}

// A directory that links to itself lists forever as an autoindex (train/loop/loop/...): the crawl
// stops at its depth limit with an error that says so, and does not run out of stack.
TEST_F(HttpOriginTest, ACrawlThatLoopsIsAnErrorNotAnEndlessWalk) {
  std::filesystem::create_directory_symlink(".", root_ / "train" / "loop");
  auto o = origin();
  const Status listed = o->list([](std::vector<OriginObject>&&) { return Status::ok(); });
  ASSERT_FALSE(listed.isOk()) << "a looping listing was listed";
  EXPECT_EQ(listed.code(), StatusCode::kFailedPrecondition) << listed;
  EXPECT_NE(listed.message().find("directories nest deeper than 32"), std::string::npos) << listed;
  EXPECT_NE(listed.message().find("options.index"), std::string::npos) << listed;
}

TEST_F(HttpOriginTest, ReadsRangesAndChecksTheVersion) {
  auto o = origin();
  const auto all = listAll(*o);
  EXPECT_EQ(*o->read(all[2].path, 3, 4, all[2].etag), "3456");
  EXPECT_EQ(*o->read(all[2].path, 8, 2, all[2].etag), "89");
  auto big = o->read(all[1].path, 50000, 40000, all[1].etag);
  ASSERT_TRUE(big.isOk()) << big.status();
  EXPECT_EQ(*big, std::string(40000, 'a'));

  // Change the file: a new size means a new ETag.
  write("train/deep-dir/b c.bin", "changed content");
  EXPECT_EQ(o->read(all[2].path, 0, 4, all[2].etag).status().code(),
            StatusCode::kFailedPrecondition);
  std::filesystem::remove(root_ / "labels.csv");
  EXPECT_EQ(o->read("labels.csv", 0, 4, all[0].etag).status().code(), StatusCode::kNotFound);
}

// An origin with neither ETag nor Last-Modified: each file is pinned by its size, and a read
// of a file whose size changed is refused.
TEST_F(HttpOriginTest, PinsFilesWithoutVersionsByTheirSize) {
  server_->withoutVersions();
  auto o = origin();
  const auto all = listAll(*o);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].etag, sizeVersion(100000));
  EXPECT_TRUE(isSizeVersion(all[1].etag));
  EXPECT_EQ(*o->read(all[2].path, 3, 4, all[2].etag), "3456");
  write("train/deep-dir/b c.bin", "0123456789+");
  EXPECT_EQ(o->read(all[2].path, 0, 4, all[2].etag).status().code(),
            StatusCode::kFailedPrecondition);
  write("train/deep-dir/b c.bin", "01");
  EXPECT_EQ(o->read(all[2].path, 5, 4, all[2].etag).status().code(),
            StatusCode::kFailedPrecondition)
      << "a file now shorter than the range asked";
  write("index.json", R"({"files":[{"path":"labels.csv","size":4}]})");
  EXPECT_EQ(listAll(*origin("index.json"))[0].etag, sizeVersion(4));
}

TEST_F(HttpOriginTest, RetriesServerErrorsAndTruncatedBodies) {
  auto o = origin();
  std::vector<int64_t> gated;  // the bytes each retry asked its gate for
  o->setRetryGate([&gated](int64_t bytes) { gated.push_back(bytes); });
  const auto all = listAll(*o);
  const int64_t before = o->retries();
  server_->failNext(2, 503);
  EXPECT_EQ(*o->read(all[2].path, 0, 3, all[2].etag), "012");
  EXPECT_EQ(o->retries() - before, 2);
  EXPECT_EQ(gated, (std::vector<int64_t>{3, 3})) << "each retry passes the gate with its range";
  server_->truncateNext(1);
  auto whole = o->read(all[1].path, 0, 100000, all[1].etag);
  ASSERT_TRUE(whole.isOk()) << whole.status();
  EXPECT_EQ(whole->size(), 100000u) << "a truncated body is fetched again, never returned";
  EXPECT_EQ(gated, (std::vector<int64_t>{3, 3, 100000})) << "the range asked for again";
  server_->failNext(100, 500);
  EXPECT_EQ(o->read(all[2].path, 0, 3, all[2].etag).status().code(), StatusCode::kUnavailable);
  server_->failNext(0, 500);
}

TEST_F(HttpOriginTest, RetriesARequestThatTimesOut) {
  const auto all = listAll(*origin());
  auto o = makeHttpOrigin({.baseUrl = server_->url(),
                           .timeout = std::chrono::seconds(1),
                           .retryDelay = std::chrono::milliseconds(1)});
  ASSERT_TRUE(o.isOk()) << o.status();
  server_->stallNext(1, std::chrono::milliseconds(2500));  // past the 1 s timeout
  auto data = (*o)->read(all[2].path, 0, 3, all[2].etag);
  ASSERT_TRUE(data.isOk()) << data.status();
  EXPECT_EQ(*data, "012");
  EXPECT_EQ((*o)->retries(), 1);
}

TEST_F(HttpOriginTest, ListsFromAJsonIndex) {
  write(
      "index.json",
      R"({"files":[{"path":"train/a.bin","size":100000,"etag":""},{"path":"labels.csv","size":4}]})");
  auto o = origin("index.json");
  const auto all = listAll(*o);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].path, "train/a.bin");
  EXPECT_EQ(*o->read("labels.csv", 0, 4, ""), "x,y\n");
  write("bad.json", R"({"items":[]})");
  auto bad = origin("bad.json");
  EXPECT_EQ(bad->list([](std::vector<OriginObject>&&) { return Status::ok(); }).code(),
            StatusCode::kInvalidArgument);
}

// An index that gives sizes only pins its files by size, though the server sends ETags: a file
// is read while its size is the listed one, and is a change once it is not.
TEST_F(HttpOriginTest, AnIndexWithoutVersionsPinsFilesBySize) {
  write("index.json", R"({"files":[{"path":"labels.csv","size":4}]})");
  auto o = origin("index.json");
  const auto all = listAll(*o);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].etag, sizeVersion(4));
  auto read = o->read("labels.csv", 0, 4, all[0].etag);
  ASSERT_TRUE(read.isOk()) << read.status();
  EXPECT_EQ(*read, "x,y\n");
  write("labels.csv", "x,y,z\n");
  EXPECT_EQ(o->read("labels.csv", 0, 4, all[0].etag).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(HttpOriginTest, RefusesBadUrls) {
  EXPECT_EQ(makeHttpOrigin({.baseUrl = "ftp://x/"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(makeHttpOrigin({.baseUrl = "http://x/no-slash"}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(HttpIndexTest, SizesAreWholeNonNegativeByteCounts) {
  // Found by tests/fuzz/http_index_fuzz: a size of 1e300 overflowed int64_t and a negative one
  // was listed as it was.
  for (const char* bad :
       {R"({"files":[{"path":"a","size":-1}]})", R"({"files":[{"path":"a","size":1e300}]})",
        R"({"files":[{"path":"a","size":1.5}]})",
        R"({"files":[{"path":"a","size":18446744073709551615}]})"}) {
    EXPECT_EQ(parseHttpIndex(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto files = parseHttpIndex(R"({"files":[{"path":"a","size":1500.0},{"path":"b","size":0}]})");
  ASSERT_TRUE(files.isOk()) << files.status();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].size, 1500);
  EXPECT_EQ((*files)[1].etag, sizeVersion(0));
}

TEST(HttpIndexTest, AutoindexLinksStayInsideTheDirectory) {
  // Found by tests/fuzz/http_index_fuzz: a link with a NUL byte was listed, and links were
  // checked before they were percent-decoded ("%2e%2e/" is "../": the crawl climbed out of the
  // dataset); "./" became an empty link.
  const std::string page = std::string("<a href=\"labels.") + '\0' +
                           "csv\">x</a> <a href=\"%2e%2e/\">up</a> <a href=\"./\">here</a> "
                           "<a href=\"a/%2E/b\">dot</a> <a href=\"a//b\">empty</a> "
                           "<a href=\"x%00y\">nul</a> <a href=\"train/\">train/</a> "
                           "<a href=\"./train/\">again</a> <a HREF=\"b%20c.bin\">b c</a>";
  EXPECT_EQ(autoindexLinks(page), (std::vector<std::string>{"train/", "b c.bin"}));
}

TEST(HttpIndexTest, AutoindexLinksOfAnyLengthAreReadWithoutRecursion) {
  // Found by tests/fuzz/http_index_fuzz with long inputs (-max_len=131072 -len_control=0): the
  // std::regex that found the links recursed once per character, and a link of 50 KB overflowed
  // the stack (8 MiB) of the crawling thread.
  const std::string longName(1 << 20, 'a');
  const std::string page = "<a href=\"\">none</a><a href=\"" + longName +
                           "\">long</a> HREF=\"x href=\"labels.csv\" <a href=\"unclosed";
  EXPECT_EQ(autoindexLinks(page), (std::vector<std::string>{longName, "x href="}));
}

}  // namespace
}  // namespace granary::cache
