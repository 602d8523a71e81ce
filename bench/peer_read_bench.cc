// Reads of another node's cache, beside a local read and the wire: two granary-cache-node
// processes on loopback (A on 127.0.0.2, B on 127.0.0.3), a file:// origin, a dataset of node set
// [A, B] (replicas 1) read through a volume published on A: only the files B holds, by --readers
// readers (each file whole, 1 MiB reads, as cat), the page cache dropped before each read.
// For large files (--large N x --large-mib) and small ones (--small N x --small-kib), each run:
//   local   the same files as a dataset of A alone (A holds every byte);
//   plane   B's files over the data plane (cache-node/transfer/);
//   grpc    the same over the Peer API's ReadChunk (transferListen: "", as with TLS on);
//   wire    sendfile of the same files from the origin's disk over one plain TCP connection
//           between the same addresses, the page cache dropped as before the reads ("wire") and
//           with the files in it ("wire, cached": the stream alone);
// with the CPU seconds per GiB read on A and on B. Then the faults, each against the clean plane
// read of the large files: B killed (kill -9) a third into the read, B sending every chunk with
// a byte flipped, B stopped (SIGSTOP) a third into the read with a stall time of 2 s; every byte
// compared with the origin's.
// With --before BINARY (a granary-cache-node built from before the data plane), its peer reads
// too, as the baseline of the profile (column "before").
// Usage: peer_read_bench --cache-node BINARY [--before BINARY] [--large 64] [--large-mib 32]
// [--small 20000]
//                        [--small-kib 100] [--readers 4] [--runs 3] [--dir D]
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "bench/bench_data.h"
#include "bench/cache_node_process.h"
#include "bench/cpu_time.h"
#include "bench/wire_stream.h"
#include "common/flags.h"
#include "common/owned_fd.h"
#include "common/xxh3.h"
#include "engine/core/placement.h"

namespace granary::bench {
namespace {

using Steady = std::chrono::steady_clock;
constexpr const char* kHostA = "127.0.0.2";
constexpr const char* kHostB = "127.0.0.3";

struct Args {
  std::string cacheNode;
  std::string before;  // a granary-cache-node from before the data plane, for its figures
  int large = 64, largeMib = 32, small = 20'000, smallKib = 100, readers = 4, runs = 3;
  std::string dir = "/var/tmp/granary-peer-read-bench";
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "peer_read_bench: %s\n", what.c_str());
  std::exit(1);
}

// CPU seconds (user and system) process `pid` has used.
double cpuSeconds(pid_t pid) {
  clockid_t clock;
  if (::clock_getcpuclockid(pid, &clock) != 0)
    die("no CPU clock of process " + std::to_string(pid));
  return std::chrono::duration<double>(cpuTime(clock)).count();
}

// `count` files of `bytes` random bytes under dir/name; their names and XXH3s.
std::map<std::string, uint64_t> makeFiles(const fs::path& dir, int count, int64_t bytes) {
  fs::create_directories(dir);
  std::map<std::string, uint64_t> files;
  std::mt19937_64 random(count);
  std::vector<uint64_t> words(static_cast<size_t>((bytes + 7) / 8));
  for (int i = 0; i < count; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "f-%05d.bin", i);
    for (auto& word : words) word = random();
    std::ofstream(dir / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(words.data()), bytes);
    files[name] = XXH3_64bits(words.data(), static_cast<size_t>(bytes));
  }
  return files;
}

// One node of the pair, started (again) on its home with `more` options.
std::unique_ptr<CacheNodeProcess> startNode(const Args& args, const std::string& binary,
                                            const std::string& name, const std::string& host,
                                            bool dataPlane, bool before, const std::string& more,
                                            std::map<std::string, std::string> env = {}) {
  return std::make_unique<CacheNodeProcess>(
      binary, fs::path(args.dir) / name, name,
      CacheNodeProcess::Settings{
          .host = host,
          .dataPlane = dataPlane,
          .before = before,
          .more = "fileOriginRoots: [\"" +
                  CacheNodeProcess::sharedRoot(fs::path(args.dir) / "origin", {.before = before}) +
                  "\"]\n" + more,
          .env = std::move(env)});
}

struct Pair {
  std::unique_ptr<CacheNodeProcess> a, b;
};

// Ensures dataset `name` (the origin's directory `source`) on each of `nodes` with that node set,
// replicas 1, and waits until every one is Ready.
void ensureReady(const Args& args, const std::string& name, const std::string& source,
                 const std::vector<CacheNodeProcess*>& nodes) {
  v1::EnsureDatasetRequest request;
  request.mutable_dataset()->set_namespace_("bench");
  request.mutable_dataset()->set_name(name);
  request.mutable_dataset()->set_generation(1);
  request.mutable_dataset()->set_uid("uid-" + name);
  request.add_mounts()->mutable_source()->set_uri(
      "file://" + (fs::path(args.dir) / "origin" / source).string() + "/");
  request.mutable_cache()->set_replicas(1);
  for (CacheNodeProcess* node : nodes) {
    auto* endpoint = request.add_node_set();
    endpoint->set_node_name(node->name());
    endpoint->set_address(node->address());
  }
  for (CacheNodeProcess* node : nodes) {
    v1::EnsureDatasetResponse response;
    const grpc::Status ensured = node->call(&v1::CacheNode::Stub::EnsureDataset, request, response);
    if (!ensured.ok()) die("EnsureDataset " + name + ": " + ensured.error_message());
  }
  const auto start = Steady::now();
  for (CacheNodeProcess* node : nodes) {
    v1::GetDatasetStatusRequest asked;
    asked.mutable_dataset()->set_namespace_("bench");
    asked.mutable_dataset()->set_name(name);
    for (v1::DatasetStatus status;;) {
      const grpc::Status got = node->call(&v1::CacheNode::Stub::GetDatasetStatus, asked, status);
      if (got.ok() && status.phase() == v1::DATASET_PHASE_READY) break;
      if (got.ok() && status.phase() == v1::DATASET_PHASE_FAILED)
        die(name + ": " + status.message());
      if (seconds(start) > 1800) die(name + " is not Ready after 30 minutes");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

// The files of `files` that B holds in a set of [a, b] (replicas 1).
std::vector<std::string> heldByB(const std::map<std::string, uint64_t>& files) {
  const std::vector<std::string> nodes = {"a", "b"};
  std::vector<std::string> ofB;
  for (const auto& [name, _] : files)
    if (cache::owns("b", name, nodes, 1)) ofB.push_back(name);
  return ofB;
}

struct ReadFigures {
  double seconds = 0;
  int64_t bytes = 0;
  int wrong = 0;  // files whose bytes differ from the origin's
  double mibPerSecond() const { return mib(bytes) / seconds; }
};

// Reads each of `names` under `dir` whole with `readers` threads, each file's XXH3 against
// `files` (granary's, AVX2 where the CPU has it: the check should take little of the CPU the
// reads share).
ReadFigures readAll(const fs::path& dir, const std::vector<std::string>& names,
                    const std::map<std::string, uint64_t>& files, int readers) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int> wrong{0};
  const auto start = Steady::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < readers; ++r) {
    threads.emplace_back([&] {
      std::vector<char> buffer(1 << 20);
      for (size_t i; (i = next++) < names.size();) {
        OwnedFd file(::open((dir / names[i]).c_str(), O_RDONLY | O_CLOEXEC));
        Xxh3Stream hash;
        ssize_t n = 0;
        while (file && (n = ::read(file.get(), buffer.data(), buffer.size())) > 0) {
          hash.add(std::string_view(buffer.data(), static_cast<size_t>(n)));
          bytes += n;
        }
        if (!file || n < 0 || hash.digest() != files.at(names[i])) ++wrong;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return {seconds(start), bytes.load(), wrong.load()};
}

// `names` of the origin's `dir` sent with sendfile over one TCP connection to B's address.
ReadFigures wire(const fs::path& dir, const std::vector<std::string>& names) {
  std::vector<fs::path> files;
  for (const auto& name : names) files.push_back(dir / name);
  const StreamFigures stream = streamFiles(files, kHostB);
  return {stream.seconds, stream.bytes, 0};
}

struct Measured {
  ReadFigures figures;
  double cpuA = 0, cpuB = 0;  // CPU seconds per GiB read
};

Measured measure(Pair& pair, const fs::path& mount, const std::vector<std::string>& names,
                 const std::map<std::string, uint64_t>& files, int readers) {
  dropPageCache();
  const double a = cpuSeconds(pair.a->pid()), b = cpuSeconds(pair.b->pid());
  Measured measured{readAll(mount, names, files, readers)};
  const double gib = static_cast<double>(measured.figures.bytes) / (1 << 30);
  measured.cpuA = (cpuSeconds(pair.a->pid()) - a) / gib;
  measured.cpuB = (cpuSeconds(pair.b->pid()) - b) / gib;
  if (measured.figures.wrong > 0)
    die(std::to_string(measured.figures.wrong) + " files read with wrong bytes");
  return measured;
}

// The pair started with `more` options on both, the datasets of `sets` ensured and Ready, and
// the volumes published on A: pod "<set>" for each set, pod "<set>-local" for its dataset of A
// alone. `before`: `binary` is a version without the data plane.
Pair startPair(const Args& args, const std::string& binary, const std::vector<std::string>& sets,
               bool dataPlane, const std::string& more = "",
               std::map<std::string, std::string> envOfB = {}, bool before = false) {
  Pair pair{startNode(args, binary, "a", kHostA, dataPlane, before, more),
            startNode(args, binary, "b", kHostB, dataPlane, before, more, std::move(envOfB))};
  for (const auto& set : sets) {
    ensureReady(args, set, set, {pair.a.get(), pair.b.get()});
    // Through a second name of the directory: a dataset of other sources, so that A's reads of
    // the set never take its chunks from this one (engine: chunks shared by the same sources).
    ensureReady(args, set + "-local", set + "-alone", {pair.a.get()});
    pair.a->publish(set, {{"dataset", set}});
    pair.a->publish(set + "-local", {{"dataset", set + "-local"}});
  }
  return pair;
}

// One read's figures in each way of reading, by column.
using Row = std::map<std::string, Measured>;
const std::vector<std::string> kColumns = {"local",  "plane", "grpc",
                                           "before", "wire",  "wire, cached"};

void print(const std::string& title, const std::vector<Row>& rows) {
  std::printf("\n%s\n%-5s", title.c_str(), "run");
  for (const auto& column : kColumns)
    if (rows.front().contains(column)) std::printf(" %24s", column.c_str());
  std::printf("\n");
  Row mean;
  const auto line = [&](const char* label, const Row& row) {
    std::printf("%-5s", label);
    for (const auto& column : kColumns) {
      if (!row.contains(column)) continue;
      const Measured& m = row.at(column);
      if (column.starts_with("wire")) {
        std::printf(" %24.0f", m.figures.mibPerSecond());
      } else {
        std::printf(" %8.0f MiB/s %4.1f/%4.1f", m.figures.mibPerSecond(), m.cpuA, m.cpuB);
      }
    }
    std::printf("\n");
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    line(std::to_string(i + 1).c_str(), rows[i]);
    for (const auto& [column, m] : rows[i]) {
      Measured& sum = mean[column];
      const double n = static_cast<double>(rows.size());
      sum.figures.bytes = m.figures.bytes;
      sum.figures.seconds += m.figures.seconds / n;
      sum.cpuA += m.cpuA / n;
      sum.cpuB += m.cpuB / n;
    }
  }
  line("mean", mean);
  const auto rate = [&](const std::string& column) {
    return mean.contains(column) ? mean.at(column).figures.mibPerSecond() : 0.0;
  };
  std::printf("plane / local %.2f   plane / wire %.2f (cached %.2f)   grpc / local %.2f",
              rate("plane") / rate("local"), rate("plane") / rate("wire"),
              rate("plane") / rate("wire, cached"), rate("grpc") / rate("local"));
  if (mean.contains("before")) {
    std::printf("   plane / before %.1f   CPU per GiB on A %.2f and on B %.2f of before's",
                rate("plane") / rate("before"), mean.at("plane").cpuA / mean.at("before").cpuA,
                mean.at("plane").cpuB / mean.at("before").cpuB);
  }
  std::printf("\n(MiB/s, then CPU seconds per GiB read on A / on B)\n");
}

// B's files read through A while `fault` happens to B `after` into the read; the figures, and
// the read's seconds beside `clean`.
void fault(const std::string& what, const fs::path& mount, const std::vector<std::string>& names,
           const std::map<std::string, uint64_t>& files, int readers, double clean,
           const std::function<void()>& act) {
  dropPageCache();
  std::thread actor(act);
  const ReadFigures read = readAll(mount, names, files, readers);
  actor.join();
  std::printf(
      "%-34s %3d files with a wrong byte, %zu of %zu read, %6.1f s (clean %.1f s, "
      "lost %.1f s)\n",
      what.c_str(), read.wrong, names.size(), names.size(), read.seconds, clean,
      read.seconds - clean);
}

// A line on stderr as each read begins, with the monotonic clock's seconds (perf record -k
// CLOCK_MONOTONIC takes the same: a profile of one read is `perf report --time A,B`).
void progress(int run, const std::string& set, const std::string& column) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  std::fprintf(stderr, "[%.3f] run %d: %s files, %s\n",
               static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9, run + 1,
               set.c_str(), column.c_str());
}

int run(const Args& args) {
  if (::geteuid() != 0) die("needs root: FUSE mounts and dropping the page cache");
  fs::remove_all(args.dir);
  const fs::path origin = fs::path(args.dir) / "origin";
  std::printf("origin: %d x %d MiB and %d x %d KiB files ...\n", args.large, args.largeMib,
              args.small, args.smallKib);
  const std::map<std::string, std::map<std::string, uint64_t>> sets = {
      {"large", makeFiles(origin / "large", args.large, static_cast<int64_t>(args.largeMib) << 20)},
      {"small",
       makeFiles(origin / "small", args.small, static_cast<int64_t>(args.smallKib) << 10)}};
  for (const auto& [set, _] : sets) fs::create_directory_symlink(set, origin / (set + "-alone"));
  std::map<std::string, std::vector<std::string>> ofB;
  for (const auto& [set, files] : sets) ofB[set] = heldByB(files);
  const std::vector<std::string> names = {"large", "small"};
  std::map<std::string, std::vector<Row>> rows;
  for (const auto& set : names) rows[set].resize(static_cast<size_t>(args.runs));
  const auto mountOf = [&](Pair& pair, const std::string& pod) { return pair.a->target(pod); };
  {
    Pair pair = startPair(args, args.cacheNode, names, /*dataPlane=*/true);
    for (int run = 0; run < args.runs; ++run) {
      for (const auto& set : names) {
        Row& row = rows[set][static_cast<size_t>(run)];
        progress(run, set, "local");
        row["local"] =
            measure(pair, mountOf(pair, set + "-local"), ofB[set], sets.at(set), args.readers);
        progress(run, set, "plane");
        row["plane"] = measure(pair, mountOf(pair, set), ofB[set], sets.at(set), args.readers);
        progress(run, set, "wire");
        dropPageCache();
        row["wire"].figures = wire(origin / set, ofB[set]);          // from the disk, as B's plane
        row["wire, cached"].figures = wire(origin / set, ofB[set]);  // the files in memory now
      }
    }
  }
  // The Peer API (as with TLS on), and the version before the data plane when given.
  std::vector<std::pair<std::string, std::string>> baselines = {{"grpc", args.cacheNode}};
  if (!args.before.empty()) baselines.emplace_back("before", args.before);
  for (const auto& [column, binary] : baselines) {
    Pair pair = startPair(args, binary, names, /*dataPlane=*/false, "", {}, column == "before");
    for (int run = 0; run < args.runs; ++run) {
      for (const auto& set : names) {
        progress(run, set, column);
        rows[set][static_cast<size_t>(run)][column] =
            measure(pair, mountOf(pair, set), ofB[set], sets.at(set), args.readers);
      }
    }
  }
  for (const auto& set : names) {
    char title[200];
    std::snprintf(title, sizeof title,
                  "%s files, only B's (%zu of %zu), %d readers, page cache dropped before each "
                  "read, through A's volume:",
                  set.c_str(), ofB[set].size(), sets.at(set).size(), args.readers);
    print(title, rows[set]);
  }

  std::printf("\nfaults (large files, %d readers):\n", args.readers);
  const auto& files = sets.at("large");
  const auto& names0 = ofB["large"];
  double clean = 0;
  {
    Pair pair = startPair(args, args.cacheNode, {"large"}, true);
    dropPageCache();
    clean = readAll(mountOf(pair, "large"), names0, files, args.readers).seconds;
    fault("B killed (kill -9) a third in:", mountOf(pair, "large"), names0, files, args.readers,
          clean, [&] {
            std::this_thread::sleep_for(std::chrono::duration<double>(clean / 3));
            pair.b->stop(SIGKILL);
          });
  }
  {
    Pair pair = startPair(args, args.cacheNode, {"large"}, true, "",
                          {{"GRANARY_TEST_TRANSFER_FLIP_BYTE", "1"}});
    fault("a byte flipped in every chunk:", mountOf(pair, "large"), names0, files, args.readers,
          clean, [] {});
  }
  {
    Pair pair = startPair(args, args.cacheNode, {"large"}, true, "transferStallMs: 2000");
    fault("B stopped (SIGSTOP) a third in, stall 2 s:", mountOf(pair, "large"), names0, files,
          args.readers, clean, [&] {
            std::this_thread::sleep_for(std::chrono::duration<double>(clean / 3));
            ::kill(pair.b->pid(), SIGSTOP);
          });
    ::kill(pair.b->pid(), SIGCONT);
  }
  fs::remove_all(args.dir);
  return 0;
}

}  // namespace
}  // namespace granary::bench

int main(int argc, char** argv) {
  granary::bench::Args args;
  CLI::App app("Reads of another cache node's chunks beside local reads and the wire");
  app.add_option("--cache-node", args.cacheNode, "the granary-cache-node binary")->required();
  app.add_option("--before", args.before,
                 "a granary-cache-node from before the data plane: its peer reads as a column");
  app.add_option("--large", args.large, "large files");
  app.add_option("--large-mib", args.largeMib, "MiB per large file");
  app.add_option("--small", args.small, "small files");
  app.add_option("--small-kib", args.smallKib, "KiB per small file");
  app.add_option("--readers", args.readers, "reader threads");
  app.add_option("--runs", args.runs, "runs of each read");
  app.add_option("--dir", args.dir, "work directory (removed first and at the end)");
  CLI11_PARSE(app, argc, argv);
  return granary::bench::run(args);
}
