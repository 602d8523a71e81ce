// A Dataset that follows its origin (CacheEngine::refresh), next to listing it the first time:
// a dataset of 1,000,000 small files (--scale) behind an http(s):// origin whose index names each
// file's ETag, Ready on one engine; then 1 % of the files changed, 1 % added and 1 % removed at
// the origin, and the dataset refreshed into a new version while a reader goes through every file
// of the old one. Prints the refresh's time against the first listing's, the file bytes the
// origin sent for the new version against the bytes of the files added and changed, and every
// byte of both versions compared with what the origin held for each. A refresh that finds no
// change goes first: its time, and the file bytes it fetched (0 expected).
//
// Run: build/bench/refresh_bench [--scale 0.1] [--dir /var/tmp/granary-bench]
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "bench/bench_data.h"
#include "common/clock.h"
#include "common/log.h"
#include "engine/engine.h"
#include "tests/support/http_file_server.h"

namespace granary::cache {
namespace {

using namespace granary::bench;

constexpr const char* kIndex = "index.json";

// What the origin holds of file `n` at version `v` (0 as made, 1 once changed): its size moves
// with the version, so that its ETag (civetweb's: mtime and size) does too.
std::string contentOf(int64_t n, int v) {
  const size_t size = 256 + static_cast<size_t>((n + 97 * v) % 256);
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>((n * 131 + i * 7 + v * 29) & 0xff);
  return bytes;
}

// The dataset's files: 1,000 to a directory. Of every 100, number 1 is changed, 2 removed, and a
// file beside 3 added ("add-<n>.bin").
std::string pathOf(int64_t n) {
  return "d" + std::to_string(n / 1000) + "/f-" + std::to_string(n) + ".bin";
}
std::string addedPathOf(int64_t n) {
  return "d" + std::to_string(n / 1000) + "/add-" + std::to_string(n) + ".bin";
}
bool changes(int64_t n) { return n % 100 == 1; }
bool goes(int64_t n) { return n % 100 == 2; }
bool comesBeside(int64_t n) { return n % 100 == 3; }

void writeFile(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The tree as made (kept between runs; each run puts it back as made first).
void makeTree(const fs::path& tree, int64_t files) {
  const fs::path done = tree.string() + ".done";
  if (fs::exists(done)) return;
  fs::remove_all(tree);
  for (int64_t n = 0; n < files; ++n) {
    if (n % 1000 == 0) fs::create_directories(tree / ("d" + std::to_string(n / 1000)));
    writeFile(tree / pathOf(n), contentOf(n, 0));
  }
  std::ofstream(done) << "ok";
}

// The 1 % changed, added and removed; `back` undoes it.
void changeTree(const fs::path& tree, int64_t files, bool back) {
  for (int64_t n = 0; n < files; ++n) {
    if (changes(n)) writeFile(tree / pathOf(n), contentOf(n, back ? 0 : 1));
    if (goes(n) && back) writeFile(tree / pathOf(n), contentOf(n, 0));
    if (goes(n) && !back) fs::remove(tree / pathOf(n));
    if (comesBeside(n) && back) fs::remove(tree / addedPathOf(n));
    if (comesBeside(n) && !back) writeFile(tree / addedPathOf(n), contentOf(n, 2));
  }
}

// The index the http origin lists: every file with the ETag the server gives it.
int64_t writeIndex(const fs::path& tree) {
  std::string index = "{\"files\":[";
  bool first = true;
  for (const auto& entry : fs::recursive_directory_iterator(tree)) {
    if (!entry.is_regular_file() || entry.path().filename() == kIndex) continue;
    struct stat st {};
    ::stat(entry.path().c_str(), &st);
    char etag[64];
    std::snprintf(etag, sizeof etag, "\\\"%lx.%lld\\\"", static_cast<unsigned long>(st.st_mtime),
                  static_cast<long long>(st.st_size));
    index += std::string(first ? "" : ",") + "{\"path\":\"" +
             fs::relative(entry.path(), tree).string() +
             "\",\"size\":" + std::to_string(st.st_size) + ",\"etag\":\"" + etag + "\"}";
    first = false;
  }
  std::ofstream(tree / kIndex) << index << "]}";
  return static_cast<int64_t>(fs::file_size(tree / kIndex));
}

EnsureSpec specOf(const std::string& url, int64_t generation) {
  EnsureSpec spec;
  spec.key = {"bench", "refresh", generation, "u"};
  spec.mounts.push_back({"", SourceSpec{.uri = url, .options = {{"index", kIndex}}}});
  spec.settings.chunkSize = 1 << 20;
  return spec;
}

[[noreturn]] void fail(const std::string& what, const Status& status) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), status.message().c_str());
  std::exit(1);
}

std::shared_ptr<DatasetCache> ensureOrDie(CacheEngine& engine, const EnsureSpec& spec) {
  auto cache = engine.ensure(spec);
  if (!cache.isOk()) fail("ensure", cache.status());
  return *cache;
}

// Seconds until `cache` has listed `files` files, then until it is Ready.
std::pair<double, double> listedThenReady(DatasetCache& cache, int64_t files) {
  const auto start = Clock_::now();
  double listed = -1;
  for (;;) {
    const DatasetState state = cache.state();
    if (listed < 0 && state.phase != Phase::kListing && state.progress.totalFiles == files)
      listed = seconds(start);
    if (state.phase == Phase::kReady) return {listed, seconds(start)};
    if (state.phase == Phase::kFailed || state.phase == Phase::kDegraded) {
      std::fprintf(stderr, "dataset %s: %s\n", std::string(phaseName(state.phase)).c_str(),
                   state.message.c_str());
      std::exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Files of `version` that do not read as `expected` says (a removed file must be NotFound).
struct Comparison {
  int64_t compared = 0, wrong = 0;
};
Comparison compare(DatasetCache& version, int64_t files, bool changed) {
  Comparison out;
  const auto check = [&](const std::string& path, const std::optional<std::string>& expected) {
    ++out.compared;
    auto read = version.read(path, 0, -1);
    if (!expected) {
      out.wrong += read.isOk() || read.status().code() != StatusCode::kNotFound ? 1 : 0;
    } else {
      out.wrong += !read.isOk() || *read != *expected ? 1 : 0;
    }
  };
  for (int64_t n = 0; n < files; ++n) {
    if (!changed) {
      check(pathOf(n), contentOf(n, 0));
      continue;
    }
    check(pathOf(n), goes(n)      ? std::nullopt
                     : changes(n) ? std::optional(contentOf(n, 1))
                                  : std::optional(contentOf(n, 0)));
    if (comesBeside(n)) check(addedPathOf(n), contentOf(n, 2));
  }
  return out;
}

void run(const DataArgs& args) {
  const auto files = std::max<int64_t>(1000, static_cast<int64_t>(1'000'000 * args.scale));
  const fs::path tree = args.dir / "origin" / ("refresh-" + std::to_string(files));
  const auto made = Clock_::now();
  makeTree(tree, files);
  changeTree(tree, files, true);  // as made, should a run cut short have left it changed
  const int64_t indexBytes = writeIndex(tree);
  std::printf("refresh: %lld files (%.1f s to make or find them)\n", static_cast<long long>(files),
              seconds(made));
  auto server = testing::HttpFileServer::start(tree);
  if (!server.isOk()) fail("web server", server.status());
  const fs::path state = args.dir / "refresh-node";
  fs::remove_all(state);
  EngineOptions options{.nodeName = "bench",
                        .stateDirectory = state,
                        .cacheDirectories = {{state / "cache", int64_t{64} << 30}}};
  auto engine = CacheEngine::open(options, realClock(), nullptr, nullptr);
  if (!engine.isOk()) fail("engine", engine.status());
  // File bytes the origin sent (its index left out).
  const auto fileBytes = [&] {
    return (*server)->bytesServed() - (*server)->bytesServedOf(kIndex);
  };

  auto first = ensureOrDie(**engine, specOf((*server)->url(), 1));
  const auto [listSeconds, readySeconds] = listedThenReady(*first, files);
  std::printf("  first version: listed in %.2f s, Ready after %.1f s, %.1f MiB fetched\n",
              listSeconds, readySeconds, mib(fileBytes()));

  int64_t before = fileBytes();
  auto start = Clock_::now();
  auto unchanged = (*engine)->refresh(first->key(), 2, {});
  if (!unchanged.isOk()) fail("refresh", unchanged.status());
  std::printf(
      "  refresh, origin unchanged: %.2f s (first listing %.2f s, ratio %.2f); %lld files "
      "unchanged, %s; file bytes fetched: %lld\n",
      seconds(start), listSeconds, seconds(start) / listSeconds,
      static_cast<long long>(unchanged->unchanged),
      unchanged->any() ? "A NEW VERSION (wrong)" : "no new version",
      static_cast<long long>(fileBytes() - before));

  changeTree(tree, files, false);
  writeIndex(tree);
  std::atomic<bool> reading{true};
  Comparison duringRefresh;
  std::jthread reader([&] {
    duringRefresh = compare(*first, files, false);
    reading = false;
  });
  before = fileBytes();
  start = Clock_::now();
  auto changed = (*engine)->refresh(first->key(), 2, {});
  if (!changed.isOk()) fail("refresh", changed.status());
  const double refreshSeconds = seconds(start);
  auto second = ensureOrDie(**engine, specOf((*server)->url(), 2));
  const double newReadySeconds = listedThenReady(*second, files).second;
  const int64_t fetched = fileBytes() - before;
  reader.join();
  const int64_t expected = changed->addedBytes + changed->changedBytes;
  std::printf(
      "  refresh, 1 %% changed / added / removed: %.2f s (first listing %.2f s, ratio %.2f): "
      "%lld changed, %lld added, %lld removed, %lld unchanged\n",
      refreshSeconds, listSeconds, refreshSeconds / listSeconds,
      static_cast<long long>(changed->changed), static_cast<long long>(changed->added),
      static_cast<long long>(changed->removed), static_cast<long long>(changed->unchanged));
  std::printf(
      "  new version Ready %.1f s after it was made (the first: %.1f s); file bytes fetched "
      "%lld for %lld added and changed: ratio %.4f (index %lld bytes each listing)\n",
      newReadySeconds, readySeconds, static_cast<long long>(fetched),
      static_cast<long long>(expected),
      static_cast<double>(fetched) / static_cast<double>(std::max<int64_t>(1, expected)),
      static_cast<long long>(indexBytes));
  const Comparison oldVersion = compare(*first, files, false);
  const Comparison newVersion = compare(*second, files, true);
  std::printf(
      "  old version read during the refresh: %lld files, %lld wrong; after: %lld files, %lld "
      "wrong; new version: %lld files, %lld wrong\n",
      static_cast<long long>(duringRefresh.compared), static_cast<long long>(duringRefresh.wrong),
      static_cast<long long>(oldVersion.compared), static_cast<long long>(oldVersion.wrong),
      static_cast<long long>(newVersion.compared), static_cast<long long>(newVersion.wrong));
  changeTree(tree, files, true);
}

}  // namespace
}  // namespace granary::cache

int main(int argc, char** argv) {
  granary::bench::DataArgs args;
  CLI::App app("A dataset refreshed from a changed origin, next to its first listing.",
               "refresh_bench");
  granary::bench::addDataFlags(app, args);
  if (auto code = granary::parseCommandLine(app, argc, argv)) return *code;
  granary::configureLogging({.level = granary::LogLevel::kWarn});
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  granary::cache::run(args);
  return 0;
}
