// A job's checkpoints through granary's checkpoint volume, each figure beside its baseline
// measured in the same run:
//   save      W writers, each writing F MiB (4 MiB writes, then fsync) into the volume's tree
//             while its drain runs (to a file:// origin at --drain-mib-per-s), against the same
//             bytes written to a plain directory of the same file system with nothing watching;
//             rounds alternate which goes first. Target: volume throughput / direct >= 0.9.
//             With --cache-node BINARY the volume is the one a pod gets on a cluster: a
//             granary-cache-node process's CSI checkpoint volume, published over its CSI socket
//             as the kubelet does (a read-write bind mount of the node's tree), drained by it.
//   restore   a new machine resuming from the origin (restoreTree into an empty tree), from the
//             origin read at --origin-read-mib-per-s, and the
//             same machine again (its tree already whole), against reading the same files
//             directly (every byte, from the page cache dropped where /proc/sys/vm/drop_caches
//             is writable).
//   drain     DCP-style saves (a file a writer, then .metadata renamed into place; the newest
//             two kept) every --save-every-s seconds into a drain limited to --drain-mib-per-s,
//             below the rate the saves are written at; the upload lag sampled throughout, and the
//             origin's listing polled every 20 ms: a .metadata seen before every file it names
//             is whole there counts as a marker early (must be 0).
// Usage: checkpoint_bench [--figures save,restore,drain] [--rounds N] [--writers W] [--mib F]
//                         [--origin-read-mib-per-s R]
//                         [--drain-mib-per-s R] [--saves N] [--save-every-s S] [--save-mib M]
//                         [--dir D] [--cache-node BINARY]
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "bench/cache_node_process.h"
#include "common/flags.h"
#include "common/owned_fd.h"
#include "engine/checkpoint/drainer.h"
#include "engine/checkpoint/restore.h"
#include "engine/core/bandwidth_limiter.h"
#include "engine/origin/make_origin.h"
#include "tests/support/scratch_tree.h"

namespace granary::bench {
namespace {

namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;
constexpr int64_t kMiB = 1 << 20;
constexpr size_t kWrite = 4 << 20;

struct Args {
  int rounds = 3;
  int writers = 2;
  int mib = 1024;
  int drainMibPerSecond = 100;
  int originReadMibPerSecond = 16;
  int saves = 8;
  double saveEverySeconds = 2;
  int saveMib = 64;
  std::string dir = "/var/tmp/granary-checkpoint-bench";
  std::vector<std::string> figures = {"save", "restore", "drain"};
  std::string cacheNode;  // a granary-cache-node binary: save through its CSI volume
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "checkpoint_bench: %s\n", what.c_str());
  std::exit(1);
}

double seconds(Steady::duration d) { return std::chrono::duration<double>(d).count(); }

// Writes `bytes` of pseudo-random data to `path` in 4 MiB writes and fsyncs it.
void writeFile(const fs::path& path, int64_t bytes, uint32_t seed) {
  static const std::string block = [] {
    std::mt19937 random(7);
    std::string b(kWrite, '\0');
    for (char& c : b) c = static_cast<char>(random());
    return b;
  }();
  fs::create_directories(path.parent_path());
  OwnedFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) die("cannot create " + path.string());
  std::string piece = block;
  for (int64_t done = 0; done < bytes;) {
    piece[0] = static_cast<char>(seed + done / kWrite);  // no two pieces alike
    const size_t n = static_cast<size_t>(std::min<int64_t>(kWrite, bytes - done));
    if (::write(fd.get(), piece.data(), n) != static_cast<ssize_t>(n))
      die("cannot write " + path.string());
    done += static_cast<int64_t>(n);
  }
  if (::fsync(fd.get()) != 0) die("cannot fsync " + path.string());
}

// W writers at once, each its own file under `directory`; the seconds it took.
double saveAll(const fs::path& directory, const Args& args, uint32_t seed) {
  const auto start = Steady::now();
  std::vector<std::jthread> writers;
  for (int w = 0; w < args.writers; ++w)
    writers.emplace_back([&, w] {
      writeFile(directory / ("__" + std::to_string(w) + "_0.distcp"), args.mib * kMiB,
                seed + static_cast<uint32_t>(w));
    });
  writers.clear();
  return seconds(Steady::now() - start);
}

void dropCaches() {
  ::sync();
  std::ofstream("/proc/sys/vm/drop_caches") << "3";
}

// Copies every file below `from` to `to` (read, write, fsync), one at a time; the seconds it
// took.
double copyAll(const fs::path& from, const fs::path& to) {
  const auto start = Steady::now();
  std::vector<char> buffer(kWrite);
  for (const auto& entry : fs::recursive_directory_iterator(from)) {
    if (!entry.is_regular_file()) continue;
    const fs::path target = to / entry.path().lexically_relative(from);
    fs::create_directories(target.parent_path());
    OwnedFd in(::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC));
    OwnedFd out(::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!in || !out) die("cannot copy " + entry.path().string());
    for (ssize_t n; (n = ::read(in.get(), buffer.data(), buffer.size())) > 0;)
      if (::write(out.get(), buffer.data(), static_cast<size_t>(n)) != n) die("cannot copy");
    if (::fsync(out.get()) != 0) die("cannot fsync " + target.string());
  }
  return seconds(Steady::now() - start);
}

// Reads every byte of every file below `root`; the seconds it took.
double readAll(const fs::path& root) {
  const auto start = Steady::now();
  std::vector<char> buffer(kWrite);
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    OwnedFd fd(::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC));
    while (fd && ::read(fd.get(), buffer.data(), buffer.size()) > 0) {
    }
  }
  return seconds(Steady::now() - start);
}

struct Volume {
  fs::path tree, record, origin;
  std::unique_ptr<checkpoint::Drainer> drainer;
};

cache::SourceSpec sourceOf(const fs::path& origin) { return {.uri = "file://" + origin.string()}; }

Volume startVolume(const fs::path& home, const Args& args) {
  Volume v{home / "tree", home / "record", home / "origin", nullptr};
  fs::create_directories(v.tree);
  fs::create_directories(v.origin);
  auto writer = checkpoint::makeOriginWriter(sourceOf(v.origin), {.fileOriginRoots = {home}});
  if (!writer.isOk()) die(writer.status().toString());
  auto drainer =
      checkpoint::Drainer::start({.tree = v.tree,
                                  .recordFile = v.record,
                                  .bandwidthBytesPerSecond = args.drainMibPerSecond * kMiB},
                                 std::move(*writer), realClock());
  if (!drainer.isOk()) die(drainer.status().toString());
  v.drainer = std::move(*drainer);
  return v;
}

// The checkpoint volume a pod gets on a cluster: a granary-cache-node process serving its CSI
// socket, the volume published as the kubelet publishes it, drained by the node to a file://
// origin at HOME/origin.
class NodeVolume {
 public:
  NodeVolume(const std::string& binary, const fs::path& home, const Args& args)
      : node_(binary, home / "node", "bench") {
    fs::create_directories(home / "origin");
    node_.publish("bench-worker-0",
                  {{"checkpoints", "file://" + (home / "origin").string()},
                   {"bandwidthLimit", std::to_string(args.drainMibPerSecond * kMiB)}});
  }
  fs::path target() const { return node_.target("bench-worker-0"); }

 private:
  CacheNodeProcess node_;
};

bool drained(checkpoint::Drainer& drainer) {
  return drainer.waitDrained(std::stop_token{}, nullptr);
}

void benchSave(const Args& args) {
  std::printf(
      "save: %d writers x %d MiB, 4 MiB writes + fsync; drain to a file:// origin at %d "
      "MiB/s beside it, by %s\n",
      args.writers, args.mib, args.drainMibPerSecond,
      args.cacheNode.empty() ? "the checkpoint library in process"
                             : "a granary-cache-node through its CSI volume");
  std::vector<double> ratios;
  double totals[2] = {0, 0};  // seconds through the volume, directly
  for (int round = 0; round < args.rounds; ++round) {
    const fs::path home = fs::path(args.dir) / "save";
    testing::removeTree(home);
    std::optional<Volume> volume;
    std::optional<NodeVolume> node;
    if (args.cacheNode.empty())
      volume = startVolume(home, args);
    else
      node.emplace(args.cacheNode, home, args);
    const fs::path tree = node ? node->target() : volume->tree;
    const fs::path direct = home / "direct";
    double throughVolume = 0, plain = 0;
    for (int turn = 0; turn < 2; ++turn) {
      ::sync();  // each side starts with the other's writes on the disk, not in flight
      if ((turn + round) % 2 == 0)
        throughVolume = saveAll(tree / "step-1", args, 1);
      else
        plain = saveAll(direct / "step-1", args, 1);
    }
    const double total = static_cast<double>(args.writers) * args.mib;
    ratios.push_back(plain / throughVolume);
    totals[0] += throughVolume;
    totals[1] += plain;
    std::printf(
        "  round %d: through the volume %.2f s (%.0f MiB/s), directly %.2f s (%.0f MiB/s): "
        "ratio %.2f\n",
        round + 1, throughVolume, total / throughVolume, plain, total / plain, ratios.back());
    volume.reset();
    node.reset();
    testing::removeTree(home);
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf(
      "save: volume / direct throughput, median of %d rounds: %.2f; over all rounds %.2f s "
      "through the volume, %.2f s directly: %.2f (target >= 0.9)\n\n",
      args.rounds, ratios[ratios.size() / 2], totals[0], totals[1], totals[1] / totals[0]);
}

// An origin whose reads share `bytesPerSecond`.
class ThrottledOrigin final : public cache::Origin {
 public:
  ThrottledOrigin(cache::Origin& inner, int64_t bytesPerSecond)
      : inner_(inner), limiter_(realClock(), bytesPerSecond) {}
  Status list(const std::function<Status(std::vector<cache::OriginObject>&&)>& each) override {
    return inner_.list(each);
  }
  Result<std::string> read(const std::string& path, int64_t offset, int64_t length,
                           const std::string& etag) override {
    limiter_.acquire(length);
    return inner_.read(path, offset, length, etag);
  }

 private:
  cache::Origin& inner_;
  cache::BandwidthLimiter limiter_;
};

void benchRestore(const Args& args) {
  const fs::path home = fs::path(args.dir) / "restore";
  testing::removeTree(home);
  Volume volume = startVolume(home, args);
  saveAll(volume.tree / "step-1", args, 3);
  const auto drainStart = Steady::now();
  if (!drained(*volume.drainer)) die("the drain did not end");
  std::printf("restore: %d files x %d MiB drained to the origin in %.1f s (limit %d MiB/s)\n",
              args.writers, args.mib, seconds(Steady::now() - drainStart), args.drainMibPerSecond);
  volume.drainer.reset();

  auto origin = cache::makeOrigin(sourceOf(volume.origin), {.fileOriginRoots = {home}});
  if (!origin.isOk()) die(origin.status().toString());
  const auto restore = [&](const fs::path& machine) {
    fs::create_directories(machine / "tree");
    const auto start = Steady::now();
    auto restored = checkpoint::restoreTree(**origin,
                                            {.tree = machine / "tree",
                                             .recordFile = machine / "record",
                                             .staging = machine / "staging"},
                                            std::stop_token{}, nullptr);
    if (!restored.isOk()) die(restored.status().toString());
    return std::pair(seconds(Steady::now() - start), *restored);
  };
  dropCaches();
  const auto [elsewhere, fromOrigin] = restore(home / "machine-2");
  dropCaches();
  const double copied = copyAll(volume.origin, home / "copied");
  dropCaches();
  const double read = readAll(volume.origin);
  const auto [again, kept] = restore(home / "machine-2");
  // The origin read no faster than --origin-read-mib-per-s, as the local demo's origin is.
  ThrottledOrigin slow(**origin, args.originReadMibPerSecond * kMiB);
  dropCaches();
  const auto startSlow = Steady::now();
  auto slowly = checkpoint::restoreTree(slow,
                                        {.tree = home / "machine-3" / "tree",
                                         .recordFile = home / "machine-3" / "record",
                                         .staging = home / "machine-3" / "staging"},
                                        std::stop_token{}, nullptr);
  if (!slowly.isOk()) die(slowly.status().toString());
  const double throttled = seconds(Steady::now() - startSlow);
  std::printf("  new machine, from the origin: %.2f s for %" PRId64
              " files (%.0f MiB); copying "
              "them directly (read, write, fsync): %.2f s, ratio %.2f; reading them: %.2f s, "
              "ratio %.2f\n",
              elsewhere, fromOrigin.files, static_cast<double>(fromOrigin.bytes) / kMiB, copied,
              elsewhere / copied, read, elsewhere / read);
  std::printf("  same machine again: %.3f s (%" PRId64 " files kept, %" PRId64
              " read); ratio to reading directly %.3f\n",
              again, kept.localFiles, kept.files, again / read);
  std::printf(
      "  new machine, from the origin read at %d MiB/s: %.2f s; ratio to copying directly "
      "%.2f, to reading %.2f\n\n",
      args.originReadMibPerSecond, throttled, throttled / copied, throttled / read);
  testing::removeTree(home);
}

// Checkpoints at the origin whose .metadata was there while one of the files it names was not
// whole: the marker seen, then a file missing or short, then the marker seen again (a rotation
// removes the marker before the files, so a marker there before and after the look at the files
// was there during it).
int earlyMarkers(const fs::path& origin, const Args& args, std::set<std::string>& complete) {
  int early = 0;
  std::error_code error;
  for (fs::directory_iterator step(origin, error), end; !error && step != end;
       step.increment(error)) {
    const fs::path marker = step->path() / ".metadata";
    if (!fs::exists(marker)) continue;
    int whole = 0;
    for (int w = 0; w < args.writers; ++w) {
      std::error_code e;
      const auto size = fs::file_size(step->path() / ("__" + std::to_string(w) + "_0.distcp"), e);
      whole += !e && static_cast<int64_t>(size) == args.saveMib * kMiB;
    }
    if (whole == args.writers) {
      complete.insert(step->path().filename().string());
    } else if (fs::exists(marker)) {
      ++early;
    }
  }
  return early;
}

void benchDrain(const Args& args) {
  const fs::path home = fs::path(args.dir) / "drain";
  testing::removeTree(home);
  Volume volume = startVolume(home, args);
  std::atomic<int> listings = 0, early = 0;
  std::set<std::string> complete;  // the poller's
  std::jthread poller([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      early += earlyMarkers(volume.origin, args, complete);
      ++listings;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  double maxLag = 0, writeSeconds = 0;
  const auto start = Steady::now();
  for (int save = 1; save <= args.saves; ++save) {
    const auto saveStart = Steady::now();
    const fs::path step = volume.tree / ("step-" + std::to_string(save));
    Args one = args;
    one.mib = args.saveMib;
    writeSeconds += saveAll(step, one, static_cast<uint32_t>(save) * 100);
    std::ofstream(step / ".metadata.tmp") << "step " << save << "\n";
    fs::rename(step / ".metadata.tmp", step / ".metadata");
    if (save > 2) fs::remove_all(volume.tree / ("step-" + std::to_string(save - 2)));
    while (seconds(Steady::now() - saveStart) < args.saveEverySeconds) {
      maxLag = std::max(maxLag, volume.drainer->status().lag.count());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const auto s = volume.drainer->status();
    std::printf("  after save %d: lag %.1f s, %" PRId64 " files (%.0f MiB) waiting, %" PRId64
                " removals\n",
                save, s.lag.count(), s.pendingFiles, static_cast<double>(s.pendingBytes) / kMiB,
                s.pendingRemovals);
  }
  const double savesTook = seconds(Steady::now() - start);
  if (!drained(*volume.drainer)) die("the drain did not end");
  const double drainedAt = seconds(Steady::now() - start);
  poller.request_stop();
  poller.join();
  const double written = static_cast<double>(args.saves) * args.writers * args.saveMib;
  std::printf(
      "drain: %d saves of %d x %d MiB written at %.0f MiB/s, one every %.1f s (%.0f MiB/s "
      "on average), drained at <= %d MiB/s\n",
      args.saves, args.writers, args.saveMib, written / writeSeconds, args.saveEverySeconds,
      written / savesTook, args.drainMibPerSecond);
  std::printf(
      "  upload lag: max %.1f s; drained %.1f s after the last save; one save takes %.1f s "
      "at the limit\n",
      maxLag, drainedAt - savesTook,
      args.writers * args.saveMib / static_cast<double>(args.drainMibPerSecond));
  std::printf(
      "  origin listings polled: %d; markers before the files they name: %d (must be 0); "
      "checkpoints seen whole at the origin: %zu of %d (the rest rotated away before "
      "they drained)\n",
      listings.load(), early.load(), complete.size(), args.saves);
  volume.drainer.reset();
  testing::removeTree(home);
}

}  // namespace
}  // namespace granary::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is measured
  granary::bench::Args args;
  CLI::App app("granary's checkpoint volume against writing and reading the disk directly");
  app.add_option("--rounds", args.rounds, "rounds of the save figure")->check(CLI::Range(1, 100));
  app.add_option("--writers", args.writers, "writers at once")->check(CLI::Range(1, 64));
  app.add_option("--mib", args.mib, "MiB each writer saves")->check(CLI::Range(1, 1 << 20));
  app.add_option("--drain-mib-per-s", args.drainMibPerSecond, "the drain's bandwidth limit")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--origin-read-mib-per-s", args.originReadMibPerSecond,
                 "the origin's read rate in the restore figure's throttled restore")
      ->check(CLI::Range(1, 100000));
  app.add_option("--saves", args.saves, "saves of the drain figure")->check(CLI::Range(1, 1000));
  app.add_option("--save-every-s", args.saveEverySeconds, "seconds between saves")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--save-mib", args.saveMib, "MiB a writer saves in the drain figure")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--dir", args.dir, "scratch directory (on the disk to measure)");
  app.add_option("--cache-node", args.cacheNode,
                 "a granary-cache-node binary: the save figure writes through its CSI volume")
      ->check(CLI::ExistingFile);
  app.add_option("--figures", args.figures, "which figures: save, restore, drain")
      ->delimiter(',')
      ->check(CLI::IsMember({"save", "restore", "drain"}));
  if (auto exit = granary::parseCommandLine(app, argc, argv)) return *exit;
  const auto wanted = [&](const std::string& figure) {
    return std::find(args.figures.begin(), args.figures.end(), figure) != args.figures.end();
  };
  if (wanted("save")) granary::bench::benchSave(args);
  if (wanted("restore")) granary::bench::benchRestore(args);
  if (wanted("drain")) granary::bench::benchDrain(args);
  return 0;
}
