// Reading datasets through granary's mounts, each figure printed next to its baseline measured
// in the same run:
//   read   sequential 1 MiB reads of 4 large files, and shuffled whole reads of 100 KiB files
//          and of 4 MiB files (--medium-kib) with 8 threads, through the mount of the warm cache ÷
//          the same bytes read directly from local disk (page cache, directory entries and inodes
//          dropped before each; the small files also with only the page cache dropped, as a later
//          epoch finds them): from the cache's own chunk files (the very blocks the mount reads, so
//          disk placement cancels out) and from a copy written in the same run; both mount paths
//          side by side (files passed through where the kernel can, and every read copied through
//          the node), with the CPU the node spends per GiB read; targets >= 1.0 sequential, >= 0.95
//          small. The small files also through the floors of a FUSE path (bench/minimal_fs.h)
//   stat   stat and readdir of every entry of a 1,000,000-file dataset through the mount vs
//          the same tree on local disk (caches dropped before each)
//   epoch  8 readers, each file followed by a compute pause, over a throttled web origin:
//          warming in parallel through the mount vs copy-then-read vs reading the origin
//          directly; two epochs
//   bigdir (only when named) one directory of 1,000,000 files read through the mount: the
//          node's resident memory before and after, vs the bytes of the names listed
// Usage: mount_bench [--scale F] [--repeat N] [--throttle-mib N] [--compute-ms N] [--dir D]
//                    [section...]
// Needs root and /dev/fuse. Data under --dir (default /var/tmp/granary-bench) is reused.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <set>
#include <thread>

#include "bench/bench_data.h"
#include "bench/cpu_time.h"
#include "bench/minimal_fs.h"
#include "bench/resident_memory.h"
#include "common/flags.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/mount/dataset_fs.h"
#include "engine/origin/origin.h"
#include "tests/support/http_file_server.h"

namespace granary::cache {
namespace {

using namespace granary::bench;

struct Args : DataArgs {
  int repeat = 3;  // turns of each side of a read comparison
  int computeMs = 3;
  int mediumKib = 4096;  // the read section's mid-sized files
  std::set<std::string> sections;
};

[[noreturn]] void die(const std::string& what, const Status& status) {
  std::fprintf(stderr, "mount_bench: %s: %s\n", what.c_str(), status.message().c_str());
  std::exit(1);
}

// An in-process cache node and one dataset of it mounted at `mountpoint`.
struct MountedDataset {
  MountedDataset(const fs::path& state, const std::string& uri, WarmMode warm,
                 const fs::path& mountpoint, int64_t quota) {
    fs::remove_all(state);
    EngineOptions options{.nodeName = "n1",
                          .stateDirectory = state,
                          .cacheDirectories = {{state / "cache", quota}},
                          .warmConcurrency = 16};
    if (uri.starts_with("file://")) options.origins.fileOriginRoots = {uri.substr(7)};
    auto opened = CacheEngine::open(options, realClock(), nullptr, nullptr);
    if (!opened.isOk()) die("engine", opened.status());
    engine = std::move(*opened);
    EnsureSpec spec;
    spec.key = {"bench", "data", 1, "u"};
    SourceSpec source{.uri = uri};
    if (uri.starts_with("http")) source.options = {{"index", "index.json"}};
    spec.mounts.push_back({"", source});
    spec.settings.nodeSet = {"n1"};
    spec.settings.chunkSize = 16 << 20;
    spec.settings.capacityBytes = quota;
    spec.settings.warm = warm;
    auto ensured = engine->ensure(spec);
    if (!ensured.isOk()) die("ensure", ensured.status());
    cache = *ensured;
    ::umount2(mountpoint.c_str(), MNT_DETACH);
    // Files passed through whatever their size, to measure both paths for each.
    auto mounted = DatasetFilesystem::mount(cache, mountpoint, &readers,
                                            {.passthroughMinAverageFileBytes = 0});
    if (!mounted.isOk()) die("mount", mounted.status());
    fs = std::move(*mounted);
  }
  ~MountedDataset() {
    fs.reset();
    cache.reset();
    engine.reset();
  }
  std::unique_ptr<CacheEngine> engine;
  std::shared_ptr<DatasetCache> cache;
  ReaderAccounting readers{nullptr};
  std::unique_ptr<DatasetFilesystem> fs;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// What a readAll() took: bytes per second, and the CPU this process spent meanwhile outside
// the reading threads (the cache node's, serving them).
struct ReadRun {
  double rate = 0;
  double nodeCpuSeconds = 0;
  int64_t bytes = 0;
};

// Reads every file under `root` whole, in 1 MiB reads, with `threads` readers taking files in
// turn; `pause` runs after each file (a training step).
ReadRun readAll(const fs::path& root, const std::vector<std::string>& files, int threads,
                const std::function<void()>& pause = {}) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> readerCpuNanos{0};
  const auto cpuBefore = cpuTime(CLOCK_PROCESS_CPUTIME_ID);
  const auto start = Clock_::now();
  {
    std::vector<std::jthread> readers;
    for (int t = 0; t < threads; ++t) {
      readers.emplace_back([&] {
        std::vector<char> buffer(1 << 20);
        for (size_t i; (i = next++) < files.size();) {
          const int fd = ::open((root / files[i]).c_str(), O_RDONLY);
          if (fd < 0) std::exit(1);
          for (ssize_t n; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) bytes += n;
          ::close(fd);
          if (pause) pause();
        }
        readerCpuNanos += cpuTime(CLOCK_THREAD_CPUTIME_ID).count();
      });
    }
  }
  const double elapsed = seconds(start);
  const auto nodeCpu = cpuTime(CLOCK_PROCESS_CPUTIME_ID) - cpuBefore -
                       std::chrono::nanoseconds(readerCpuNanos.load());
  return {static_cast<double>(bytes) / elapsed,
          std::max(0.0, std::chrono::duration<double>(nodeCpu).count()), bytes};
}

// The sides of a read comparison, in the order compareReads() takes them. The floors of a FUSE
// path (bench/minimal_fs.h: a daemon answering zeros, one that only reads the fresh copy, one
// that only passes it through) are read for the small files only (empty functions else).
enum Side {
  kChunkFiles,
  kPassthrough,
  kCopying,
  kZerosFs,
  kMirrorFs,
  kPassFs,
  kFreshCopy,
  kOrigin,
  kSides
};

// Reads through every side in turns, the page cache dropped before each (and the kernel's
// names too unless `keepNames`). The disk is shared and noisy: every other turn goes in the
// reverse order, and each ratio printed is the median of each turn's, the mount against the
// chunk files read next to it. The node's CPU per GiB read is printed for both mount paths.
void compareReads(const std::string& label, const std::vector<std::function<ReadRun()>>& sides,
                  int repeat, const char* target, bool keepNames) {
  std::vector<std::vector<ReadRun>> runs(sides.size());
  std::vector<double> ratios[kSides], cpuPerGib[kSides];
  std::string turns[kSides];
  for (int run = 0; run < repeat; ++run) {
    for (size_t i = 0; i < sides.size(); ++i) {
      const size_t side = run % 2 == 0 ? i : sides.size() - 1 - i;
      if (!sides[side]) continue;
      dropPageCache(keepNames);
      runs[side].push_back(sides[side]());
    }
    for (const int side : {kPassthrough, kCopying, kZerosFs, kMirrorFs, kPassFs, kFreshCopy}) {
      if (!sides[side]) continue;
      const ReadRun& r = runs[side].back();
      // The minimal daemons read the fresh copy: their baseline is the fresh copy read directly.
      const int baseline = side == kMirrorFs || side == kPassFs ? kFreshCopy : kChunkFiles;
      ratios[side].push_back(r.rate / runs[baseline].back().rate);
      cpuPerGib[side].push_back(r.nodeCpuSeconds / (static_cast<double>(r.bytes) / (1 << 30)));
      char ratio[16];
      std::snprintf(ratio, sizeof ratio, " %.3f", ratios[side].back());
      turns[side] += ratio;
    }
  }
  const auto rate = [&](int side) {
    std::vector<double> rates;
    for (const ReadRun& r : runs[side]) rates.push_back(r.rate);
    return mib(static_cast<int64_t>(median(rates)));
  };
  std::printf(
      "read %s: the cache's chunk files directly %.1f MiB/s\n"
      "     through the mount, passed through %7.1f MiB/s   ratio %.3f (target >= %s)   "
      "node CPU %.2f s/GiB   turns:%s\n"
      "     through the mount, copied         %7.1f MiB/s   ratio %.3f                  "
      "node CPU %.2f s/GiB   turns:%s\n"
      "     a fresh copy on local disk %.1f MiB/s (ratio %.3f); the origin's older files %.1f "
      "MiB/s\n",
      label.c_str(), rate(kChunkFiles), rate(kPassthrough), median(ratios[kPassthrough]), target,
      median(cpuPerGib[kPassthrough]), turns[kPassthrough].c_str(), rate(kCopying),
      median(ratios[kCopying]), median(cpuPerGib[kCopying]), turns[kCopying].c_str(),
      rate(kFreshCopy), median(ratios[kFreshCopy]), rate(kOrigin));
  if (sides[kZerosFs])
    std::printf(
        "     floors of a FUSE path (bench/minimal_fs.h): a daemon answering zeros %.1f MiB/s "
        "(ratio %.3f, turns:%s);\n"
        "       one that only reads the fresh copy %.1f MiB/s, ratio to the fresh copy %.3f "
        "(turns:%s);\n"
        "       one that only passes the fresh copy through %.1f MiB/s, ratio to it %.3f "
        "(turns:%s)\n",
        rate(kZerosFs), median(ratios[kZerosFs]), turns[kZerosFs].c_str(), rate(kMirrorFs),
        median(ratios[kMirrorFs]), turns[kMirrorFs].c_str(), rate(kPassFs), median(ratios[kPassFs]),
        turns[kPassFs].c_str());
  std::fflush(stdout);
}

void readSection(const Args& args) {
  const int small = std::max(100, static_cast<int>(100'000 * args.scale));
  const int64_t big = std::max<int64_t>(16 << 20, static_cast<int64_t>((1LL << 30) * args.scale));
  const int64_t medium = int64_t{args.mediumKib} << 10;
  const int mediums =
      std::max(16, static_cast<int>(static_cast<double>(4LL << 30) * args.scale / medium));
  const fs::path mountpoint = args.dir / "mnt", copyingMountpoint = args.dir / "mnt-copying";
  struct Case {
    std::string name;
    int count;
    int64_t size;
  };
  for (const auto& [name, count, size] :
       {Case{"big-" + std::to_string(big), 4, big},
        Case{"small-" + std::to_string(small), small, int64_t{100 * 1024}},
        Case{"medium-" + std::to_string(mediums) + "x" + std::to_string(medium), mediums,
             medium}}) {
    const int64_t total = makeDataset(args.dir / "origin", name, count, size);
    const fs::path origin = args.dir / "origin" / name;
    MountedDataset mounted(args.dir / "mount-node", "file://" + origin.string(),
                           WarmMode::kOnCreate, mountpoint, total * 2);
    if (mounted.cache->waitSettled(std::chrono::hours(1)).phase != Phase::kReady)
      die("warm", unavailable("the dataset did not become Ready"));
    if (!mounted.fs->passesThrough() && count > 4)
      std::printf("(this kernel has no FUSE passthrough: both mount paths copy)\n");
    // The same cache mounted again, every read through the node: today's path where the kernel
    // has no passthrough.
    ::umount2(copyingMountpoint.c_str(), MNT_DETACH);
    auto copying = DatasetFilesystem::mount(mounted.cache, copyingMountpoint, &mounted.readers,
                                            {.passthrough = false});
    if (!copying.isOk()) die("mount", copying.status());
    // The baseline: the same bytes in a copy written in this run, as fresh on the disk as the
    // cache's own (a virtual disk's host may still hold the origin's blocks from earlier runs).
    const fs::path local = args.dir / "local" / name;
    fs::remove_all(local);
    fs::create_directories(local.parent_path());
    fs::copy(origin, local, fs::copy_options::recursive);
    ::sync();
    auto files = filesUnder(origin);
    const bool sequential = count == 4;
    const int threads = sequential ? 1 : 8;
    if (!sequential) std::shuffle(files.begin(), files.end(), std::mt19937(7));
    const fs::path chunkRoot = args.dir / "mount-node" / "cache";
    auto chunkFiles = filesUnder(chunkRoot);
    if (!sequential) std::shuffle(chunkFiles.begin(), chunkFiles.end(), std::mt19937(7));
    const bool floors = size == 100 * 1024;  // the floors of a FUSE path: small files only
    MinimalFilesystem minimal[3];
    std::vector<std::function<ReadRun()>> floor(3);
    for (const auto answer :
         {MinimalFilesystem::kZeros, MinimalFilesystem::kMirror, MinimalFilesystem::kPassthrough}) {
      if (!floors) break;
      const fs::path point = args.dir / ("mnt-minimal-" + std::to_string(answer));
      ::umount2(point.c_str(), MNT_DETACH);
      fs::create_directories(point);
      if (!minimal[answer].mount(point, files, size, answer, local))
        die("mount", unavailable("cannot mount a minimal filesystem at " + point.string()));
      floor[answer] = [&, point] { return readAll(point, files, threads); };
    }
    const std::vector<std::function<ReadRun()>> sides = {
        [&] { return readAll(chunkRoot, chunkFiles, threads); },
        [&] { return readAll(mountpoint, files, threads); },
        [&] { return readAll(copyingMountpoint, files, threads); },
        floor[MinimalFilesystem::kZeros],
        floor[MinimalFilesystem::kMirror],
        floor[MinimalFilesystem::kPassthrough],
        [&] { return readAll(local, files, threads); },
        [&] { return readAll(origin, files, threads); }};
    const std::string label =
        sequential ? "4 x " + std::to_string(big >> 20) + " MiB sequential"
                   : std::to_string(count) + " x " + std::to_string(size >> 10) + " KiB shuffled";
    compareReads(label, sides, args.repeat, sequential ? "1.0" : "0.95", false);
    // Names as a later epoch finds them: the kernel still knows every file, only the data must
    // come from the disk.
    if (size == 100 * 1024)
      compareReads(label + ", names cached", sides, args.repeat, "0.95", true);
    fs::remove_all(local);
  }
}

// stat and readdir of every entry under `root`; entries per second.
double walk(const fs::path& root, int64_t& entries) {
  entries = 0;
  const auto start = Clock_::now();
  struct stat st;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (::lstat(e.path().c_str(), &st) != 0) std::exit(1);
    ++entries;
  }
  return static_cast<double>(entries) / seconds(start);
}

void statSection(const Args& args) {
  const int count = std::max(1000, static_cast<int>(1'000'000 * args.scale));
  const std::string name = "tree-" + std::to_string(count);
  makeDataset(args.dir / "origin", name, count, 1);
  const fs::path origin = args.dir / "origin" / name;
  const fs::path mountpoint = args.dir / "mnt";
  MountedDataset mounted(args.dir / "mount-node", "file://" + origin.string(), WarmMode::kNever,
                         mountpoint, 1 << 30);
  (void)mounted.cache->list("", "", 1);  // waits for the listing
  int64_t local = 0, through = 0;
  dropPageCache();
  const double direct = walk(origin, local);
  dropPageCache();
  const double cold = walk(mountpoint, through);
  const double again = walk(mountpoint, through);
  std::printf(
      "stat+readdir %lld entries: through the mount %.0f entries/s (again, kernel-cached: %.0f)   "
      "local disk %.0f entries/s   ratio %.3f\n",
      static_cast<long long>(through), cold, again, direct, cold / direct);
  if (local != through)
    std::printf("  (entry counts differ: local %lld, mount %lld)\n", static_cast<long long>(local),
                static_cast<long long>(through));
}

// Names read from a directory with getdents64 alone (no stat), as `ls -f` does; their bytes.
int64_t readNames(const fs::path& directory, int64_t& entries) {
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) std::exit(1);
  std::vector<char> buffer(64 << 10);
  int64_t bytes = 0;
  entries = 0;
  for (ssize_t n; (n = ::getdents64(fd, buffer.data(), buffer.size())) > 0;) {
    for (ssize_t at = 0; at < n;) {
      const auto* entry = reinterpret_cast<const dirent64*>(buffer.data() + at);
      at += entry->d_reclen;
      const std::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      bytes += static_cast<int64_t>(name.size());
      ++entries;
    }
  }
  ::close(fd);
  return bytes;
}

// One directory of --scale × 1,000,000 empty files, listed through the mount: how much the
// node's resident memory grew (it serves readdir a page at a time from its store), next to the
// bytes of the names it listed and to the same directory listed on local disk.
void bigDirectorySection(const Args& args) {
  const int count = std::max(1000, static_cast<int>(1'000'000 * args.scale));
  const fs::path origin = args.dir / "origin" / ("flat-" + std::to_string(count));
  if (!fs::exists(origin.string() + ".done")) {
    fs::remove_all(origin);
    fs::create_directories(origin);
    for (int i = 0; i < count; ++i) {
      const fs::path file = origin / ("sample-" + std::to_string(i) + ".jpg");
      ::close(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
    }
    std::ofstream(origin.string() + ".done") << "ok";
  }
  const fs::path mountpoint = args.dir / "mnt";
  MountedDataset mounted(args.dir / "mount-node", "file://" + origin.string(), WarmMode::kNever,
                         mountpoint, 1 << 30);
  (void)mounted.cache->list("", "", 1);  // waits for the listing
  int64_t local = 0, through = 0;
  dropPageCache();
  auto start = Clock_::now();
  readNames(origin, local);
  const double direct = seconds(start);
  dropPageCache();
  const ResidentMemory before = residentMemory();
  start = Clock_::now();
  const int64_t nameBytes = readNames(mountpoint, through);
  const double viaMount = seconds(start);
  const ResidentMemory after = residentMemory();
  std::printf(
      "one directory of %lld entries read through the mount in %.1f s (local disk %.1f s): the "
      "node's resident memory %.1f -> %.1f MiB (peak %.1f -> %.1f), growth %.1f MiB, against "
      "%.1f MiB of names listed\n",
      static_cast<long long>(through), viaMount, direct, mib(before.current), mib(after.current),
      mib(before.peak), mib(after.peak), mib(after.current - before.current), mib(nameBytes));
  if (local != through)
    std::printf("  (entry counts differ: local %lld, mount %lld)\n", static_cast<long long>(local),
                static_cast<long long>(through));
}

void epochSection(const Args& args) {
  const int count = std::max(100, static_cast<int>(30'000 * args.scale));
  const std::string name = "small-" + std::to_string(count);
  const int64_t total = makeDataset(args.dir / "origin", name, count, 100 * 1024);
  const fs::path origin = args.dir / "origin" / name;
  auto server = testing::HttpFileServer::start(origin);
  if (!server.isOk()) die("origin", server.status());
  (*server)->throttle(args.throttle);
  const auto files = filesUnder(origin);
  const auto pause = [ms = args.computeMs] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  };
  const auto timeOf = [&](const std::function<void()>& run) {
    const auto start = Clock_::now();
    run();
    return seconds(start);
  };
  const int readers = 8;

  // Reading the origin directly: each reader downloads its files.
  const auto direct = [&] {
    std::atomic<size_t> next{0};
    std::vector<std::jthread> threads;
    for (int t = 0; t < readers; ++t) {
      threads.emplace_back([&] {
        auto http = makeOrigin(SourceSpec{.uri = (*server)->url()});
        for (size_t i; (i = next++) < files.size();) {
          if (!(*http)->read(files[i], 0, 100 * 1024, "").isOk()) std::exit(1);
          pause();
        }
      });
    }
  };
  quietDiskWarmOrigin(origin);
  const double direct1 = timeOf(direct), direct2 = timeOf(direct);

  // Copy, then read the copy.
  const fs::path copy = args.dir / "epoch-copy";
  fs::remove_all(copy);
  quietDiskWarmOrigin(origin);
  const double copying = timeOf([&] {
    std::atomic<size_t> next{0};
    std::vector<std::jthread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&] {
        auto http = makeOrigin(SourceSpec{.uri = (*server)->url()});
        for (size_t i; (i = next++) < files.size();) {
          auto data = (*http)->read(files[i], 0, 100 * 1024, "");
          if (!data.isOk()) std::exit(1);
          fs::create_directories((copy / files[i]).parent_path());
          std::ofstream(copy / files[i], std::ios::binary) << *data;
        }
      });
    }
  });
  const double copy1 = copying + timeOf([&] { (void)readAll(copy, files, readers, pause); });
  const double copy2 = timeOf([&] { (void)readAll(copy, files, readers, pause); });
  fs::remove_all(copy);

  // Through the mount while it warms.
  quietDiskWarmOrigin(origin);
  const fs::path mountpoint = args.dir / "mnt";
  MountedDataset mounted(args.dir / "mount-node", (*server)->url(), WarmMode::kOnCreate, mountpoint,
                         total * 2);
  const double granary1 = timeOf([&] { (void)readAll(mountpoint, files, readers, pause); });
  const double granary2 = timeOf([&] { (void)readAll(mountpoint, files, readers, pause); });
  double wait = 0;
  for (const auto& r : mounted.readers.readers())
    wait += std::chrono::duration<double>(r.wait).count();
  const double computeOnly = static_cast<double>(files.size()) * args.computeMs / 1000 / readers;
  std::printf(
      "epoch %d x 100 KiB, origin %.0f MiB/s, %d readers, %d ms compute per file (%.1f s of "
      "compute per epoch)\n"
      "  granary, warming in parallel: epoch 1 %.1f s, epoch 2 %.1f s, total %.1f s (readers "
      "waited %.1f s for data)\n"
      "  copy, then read:              epoch 1 %.1f s (copy %.1f s), epoch 2 %.1f s, total %.1f s\n"
      "  reading the origin directly:  epoch 1 %.1f s, epoch 2 %.1f s, total %.1f s\n",
      count, mib(args.throttle), readers, args.computeMs, computeOnly, granary1, granary2,
      granary1 + granary2, wait, copy1, copying, copy2, copy1 + copy2, direct1, direct2,
      direct1 + direct2);
}

void addFlags(CLI::App& app, Args& args) {
  addDataFlags(app, args);
  app.add_option("--repeat", args.repeat, "turns of each side of a read comparison")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--medium-kib", args.mediumKib, "the size of the read section's mid-sized files")
      ->capture_default_str()
      ->check(CLI::Range(4, 16 << 10));
  app.add_option("--compute-ms", args.computeMs, "the epoch section's compute pause per file")
      ->capture_default_str()
      ->check(CLI::Range(0, 60'000));
  app.add_option("section", args.sections,
                 "read, stat, epoch, bigdir (default: read, stat and epoch)")
      ->check(CLI::IsMember({"read", "stat", "epoch", "bigdir"}));
}

}  // namespace
}  // namespace granary::cache

int main(int argc, char** argv) {
  using namespace granary::cache;
  Args args;
  CLI::App app(
      "Reading datasets through granary's mounts, each figure next to its baseline. "
      "Needs root and /dev/fuse.",
      "mount_bench");
  addFlags(app, args);
  if (auto code = granary::parseCommandLine(app, argc, argv)) return *code;
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0) {
    std::fprintf(stderr, "mount_bench: needs root and /dev/fuse\n");
    return 1;
  }
  if (args.sections.empty()) args.sections = {"read", "stat", "epoch"};
  granary::configureLogging({.level = granary::LogLevel::kWarn});
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (args.sections.contains("read")) readSection(args);
  if (args.sections.contains("stat")) statSection(args);
  if (args.sections.contains("epoch")) epochSection(args);
  if (args.sections.contains("bigdir")) bigDirectorySection(args);
  return 0;
}
