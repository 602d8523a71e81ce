// A job's checkpoints on a cluster's nodes: granary-cache-node processes on loopback, each with
// the job's checkpoint volume published over its CSI socket as the kubelet does, draining to a
// file:// origin limited to --drain-mib-per-s. Each figure beside its baseline in the same run:
//   wire      the same files sent with sendfile over one plain TCP connection, from the page
//             cache and from the disk, into memory and into a file (then fsync'd);
//   copy      node A's worker saves W files of F MiB (then .metadata); the seconds until node B,
//             A's peer, holds every byte, against the save itself and, from the save's end, the
//             wire from the page cache (the copy reads files just saved);
//   restore   a new pod on A (its tree whole), a pod on node C restoring from B (while the origin
//             has not got everything), and, once the origin has it all, a pod on node D restoring
//             from the origin, each against reading the same files directly from disk and
//             copying them (read, write, fsync), and the wire from the disk, the page cache
//             dropped before each;
//   lost      node A killed (kill -9) after B holds its copies and before the origin does; B told
//             A is lost: the seconds until the origin holds every file, and the files lost or
//             differing in a byte at the origin and in C's and D's restores (must be 0).
// Usage: checkpoint_peers_bench --cache-node BINARY [--writers W] [--mib F]
//                               [--drain-mib-per-s R] [--dir D]
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "bench/cache_node_process.h"
#include "bench/wire_stream.h"
#include "common/flags.h"
#include "common/owned_fd.h"
#include "tests/support/scratch_tree.h"

namespace granary::bench {
namespace {

namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;
constexpr int64_t kMiB = 1 << 20;
constexpr size_t kPiece = 4 << 20;

struct Args {
  std::string cacheNode;
  int writers = 2;
  int mib = 1024;
  int drainMibPerSecond = 40;
  std::string dir = "/var/tmp/granary-checkpoint-peers-bench";
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "checkpoint_peers_bench: %s\n", what.c_str());
  std::exit(1);
}

// A DCP-style save: a file a writer (4 MiB writes, then fsync), then .metadata renamed into place.
void save(const fs::path& step, const Args& args) {
  fs::create_directories(step);
  std::vector<std::jthread> writers;
  for (int w = 0; w < args.writers; ++w)
    writers.emplace_back([&, w] {
      std::mt19937_64 random(static_cast<uint64_t>(w) + 1);
      std::string piece(kPiece, '\0');
      OwnedFd fd(::open((step / ("__" + std::to_string(w) + "_0.distcp")).c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      for (int64_t at = 0; at < args.mib * kMiB; at += kPiece) {
        for (size_t i = 0; i < piece.size(); i += 8)
          *reinterpret_cast<uint64_t*>(&piece[i]) = random();
        if (::write(fd.get(), piece.data(), piece.size()) != static_cast<ssize_t>(piece.size()))
          die("cannot write the save");
      }
      ::fsync(fd.get());
    });
  writers.clear();
  std::ofstream(step / ".metadata.tmp") << "bench";
  fs::rename(step / ".metadata.tmp", step / ".metadata");
}

// The regular files below `root`, relative.
std::vector<std::string> filesBelow(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(root, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error))
    if (it->is_regular_file() && it->path().string().find(".granary-staging") == std::string::npos)
      out.push_back(it->path().lexically_relative(root).string());
  return out;
}

bool sameBytes(const fs::path& a, const fs::path& b) {
  std::ifstream x(a, std::ios::binary), y(b, std::ios::binary);
  std::string p(kPiece, '\0'), q(kPiece, '\0');
  while (x && y) {
    x.read(p.data(), static_cast<std::streamsize>(p.size()));
    y.read(q.data(), static_cast<std::streamsize>(q.size()));
    if (x.gcount() != y.gcount() ||
        p.compare(0, static_cast<size_t>(x.gcount()), q, 0, static_cast<size_t>(y.gcount())) != 0)
      return false;
  }
  return !x && !y;
}

// The files of `written` missing from `copy` or differing from it in a byte.
int lostOrWrong(const fs::path& written, const fs::path& copy) {
  int bad = 0;
  for (const std::string& file : filesBelow(written))
    bad += !fs::exists(copy / file) || !sameBytes(written / file, copy / file);
  return bad;
}

bool whole(const fs::path& written, const fs::path& copy) {
  return filesBelow(copy).size() == filesBelow(written).size() && lostOrWrong(written, copy) == 0;
}

// Reads every file below `root` (every byte), or copies them to `to` with read, write and fsync;
// the seconds it took.
double readOrCopy(const fs::path& root, const fs::path& to = {}) {
  const auto start = Steady::now();
  std::string buffer(kPiece, '\0');
  for (const std::string& file : filesBelow(root)) {
    OwnedFd in(::open((root / file).c_str(), O_RDONLY | O_CLOEXEC));
    OwnedFd out;
    if (!to.empty()) {
      fs::create_directories((to / file).parent_path());
      out = OwnedFd(::open((to / file).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    }
    for (ssize_t n; (n = ::read(in.get(), buffer.data(), buffer.size())) > 0;)
      if (out && ::write(out.get(), buffer.data(), static_cast<size_t>(n)) != n) die("short copy");
    if (out) ::fsync(out.get());
  }
  return seconds(start);
}

void waitFor(const std::function<bool()>& done, double limitSeconds, const std::string& what) {
  const auto start = Steady::now();
  while (!done()) {
    if (seconds(start) > limitSeconds) die("timed out waiting for " + what);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void setPeers(CacheNodeProcess& node, const std::string& uri,
              const std::vector<const CacheNodeProcess*>& peers,
              const std::vector<std::string>& lost = {}) {
  v1::SetCheckpointPeersRequest request;
  request.set_namespace_("bench");
  request.set_uri(uri);
  for (const CacheNodeProcess* peer : peers) {
    v1::NodeEndpoint& endpoint = *request.add_peers();
    endpoint.set_node_name(peer->name());
    endpoint.set_address(peer->address());
  }
  for (const std::string& name : lost) request.add_lost_nodes(name);
  v1::SetCheckpointPeersResponse response;
  const grpc::Status set = node.call(&v1::CacheNode::Stub::SetCheckpointPeers, request, response);
  if (!set.ok()) die("SetCheckpointPeers on " + node.name() + ": " + set.error_message());
}

void run(const Args& args) {
  const fs::path home = args.dir;
  testing::removeTree(home);
  const fs::path origin = home / "origin";
  fs::create_directories(origin);
  const std::string uri = "file://" + origin.string();
  const std::map<std::string, std::string> volume = {
      {"checkpoints", uri}, {"bandwidthLimit", std::to_string(args.drainMibPerSecond * kMiB)}};
  auto a = std::make_unique<CacheNodeProcess>(args.cacheNode, home / "a", "node-a");
  CacheNodeProcess b(args.cacheNode, home / "b", "node-b");
  a->publish("worker-0", volume);
  b.publish("worker-1", volume);
  setPeers(*a, uri, {&b});
  setPeers(b, uri, {a.get()});
  const double total = static_cast<double>(args.writers) * args.mib;
  std::printf(
      "checkpoints on a cluster: %d writers x %d MiB on node A, its peer node B, uploads "
      "to a file:// origin at %d MiB/s\n",
      args.writers, args.mib, args.drainMibPerSecond);

  // The written files, kept aside (a's tree goes with a) as the reference for every copy.
  const fs::path written = home / "written";
  const auto saveStart = Steady::now();
  save(a->target("worker-0") / "step-1", args);
  const double saved = seconds(saveStart);
  waitFor([&] { return whole(a->target("worker-0"), b.target("worker-1")); }, 600, "B's copies");
  const double copied = seconds(saveStart);
  readOrCopy(a->target("worker-0"), written);

  // The raw wire with the same files: from the page cache, as the copy reads files just saved,
  // and from the disk, as a restore reads them; into memory and into a file (fsync'd).
  std::vector<fs::path> files;
  for (const std::string& file : filesBelow(written)) files.push_back(written / file);
  const auto wire = [&](const fs::path& into) {
    return total / streamFiles(files, "127.0.0.1", into).seconds;
  };
  const double cachedWire = wire({}), cachedWireToFile = wire(home / "wire-copy");
  dropPageCache();
  const double diskWire = wire({});
  dropPageCache();
  const double diskWireToFile = wire(home / "wire-copy");
  std::printf(
      "  wire (sendfile over one TCP connection, MiB/s): from the page cache %.0f, into a file "
      "(fsync) %.0f; from the disk %.0f, into a file %.0f\n",
      cachedWire, cachedWireToFile, diskWire, diskWireToFile);
  const double copyRate = total / (copied - saved);
  std::printf(
      "  copy: saved in %.2f s (%.0f MiB/s); on the peer %.2f s after the save began, %.2f s "
      "after it ended (%.0f MiB/s: ÷ the wire from the page cache %.2f, into a file %.2f)\n",
      saved, total / saved, copied, copied - saved, copyRate, copyRate / cachedWire,
      copyRate / cachedWireToFile);

  dropPageCache();
  const double direct = readOrCopy(written);
  dropPageCache();
  const double directCopy = readOrCopy(written, home / "copied");
  // A restore's seconds against the baselines; one that crossed the wire against it, as rates.
  const auto line = [&](const char* what, double took, bool acrossTheWire = true) {
    const double rate = total / took;
    std::printf(
        "  restore %s: %.2f s (%.0f MiB/s); ÷ reading directly %.2f, ÷ copying directly %.2f", what,
        took, rate, took / direct, took / directCopy);
    if (acrossTheWire)
      std::printf("; ÷ the wire from the disk %.2f, into a file %.2f", rate / diskWire,
                  rate / diskWireToFile);
    std::printf("\n");
  };
  std::printf(
      "  baselines: reading the files directly %.2f s, copying them (read, write, fsync) "
      "%.2f s\n",
      direct, directCopy);
  dropPageCache();
  line("on the same node (a new pod on A)", a->publish("worker-0-again", volume), false);

  dropPageCache();
  CacheNodeProcess c(args.cacheNode, home / "c", "node-c");
  auto fromPeer = volume;
  fromPeer["checkpointPeers"] = "node-b=" + b.address();
  const int atOriginBefore = static_cast<int>(filesBelow(origin).size());
  line("on another node, from the peer", c.publish("worker-0-c", fromPeer));
  std::printf("    (the origin held %d of %zu files as it began)\n", atOriginBefore,
              filesBelow(written).size());

  // A is lost before the origin has everything: B uploads its copies.
  const bool originWhole = whole(written, origin);
  a->stop(SIGKILL);
  std::printf("  lost: node A gone with the origin %s\n",
              originWhole ? "already whole (lower --drain-mib-per-s)" : "not yet whole");
  const auto lostAt = Steady::now();
  setPeers(b, uri, {}, {"node-a"});
  waitFor([&] { return whole(written, origin); }, 1800, "the origin to hold every file");
  std::printf(
      "  lost: the origin whole %.1f s after B was told; files lost or wrong at the "
      "origin: %d, in C's restore: %d\n",
      seconds(lostAt), lostOrWrong(written, origin), lostOrWrong(written, c.target("worker-0-c")));

  dropPageCache();
  CacheNodeProcess d(args.cacheNode, home / "d", "node-d");
  line("on a new node, from the origin", d.publish("worker-0-d", volume));
  std::printf("  files lost or wrong in D's restore: %d\n",
              lostOrWrong(written, d.target("worker-0-d")));
}

}  // namespace
}  // namespace granary::bench

int main(int argc, char** argv) {
  granary::bench::Args args;
  CLI::App app{"checkpoint copies to peers, restores and a lost node, on loopback cache nodes"};
  app.add_option("--cache-node", args.cacheNode, "the granary-cache-node binary")->required();
  app.add_option("--writers", args.writers, "writers at once")->check(CLI::Range(1, 64));
  app.add_option("--mib", args.mib, "MiB each writer saves")->check(CLI::Range(1, 1 << 20));
  app.add_option("--drain-mib-per-s", args.drainMibPerSecond, "the uploads' bandwidth limit")
      ->check(CLI::Range(1, 100000));
  app.add_option("--dir", args.dir, "scratch directory (on the disk to measure)");
  CLI11_PARSE(app, argc, argv);
  granary::bench::run(args);
  return 0;
}
