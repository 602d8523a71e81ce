// The cache engine's figures, each printed next to its baseline measured in the same run:
//   warm    warm throughput from a throttled web-server origin ÷ the throttle
//           (100,000 files of 100 KB; 4 files of 1 GiB)            target >= 0.9
//   origin  origin bytes read to warm one dataset on 4 nodes (replicas 1, real gRPC peers)
//           ÷ dataset size, vs 4 nodes that each read the origin     target <= 1.01
//   read    reading the warm cache through the engine ÷ reading the same bytes from disk
//           (page cache dropped before each)                        target >= 0.9
//   memory  resident memory of granary-cache-node holding a 1,000,000-file manifest (--scale 10:
//           10 M), vs one holding a 1-file manifest                 target <= 128 MiB at 10 M;
//           and how long it took to list the origin until Ready, vs walking its tree alone
//           (a file:// tree: both with the kernel's caches dropped, then both warm);
//           and when the first file listed was served, vs Ready (where readers used to wait)
//   spread  --nodes granary-cache-node processes (32) warm one dataset, replicas 1: origin bytes
//           ÷ dataset (<= 1.01), each node's share and peer reads vs the mean (±20 %), the warm
//           rate ÷ the throttle (>= 0.9); then one node killed a third of the way: origin bytes,
//           and every byte read through every node left compared with the origin
//   resume  a node killed -9 half-way through listing 1,000,000 files of a generated S3 bucket:
//           Ready after the restart, vs a whole listing
//   listers a generated S3 bucket whose pages take --page-latency-ms each, listed by a node one
//           request at a time and --listers side by side, vs fetching and parsing it alone
//   set-listing  that bucket listed by sets of 1, 4 and --nodes node processes (--sets: other
//           sizes), each a share of it, following the others': every node Ready, the listing
//           requests the bucket answered, every node's manifest against the bucket (--page-keys:
//           fewer keys a page, so that the requests bound the listing rather than storing it);
//           then the bucket fetched and parsed alone
// Usage: cache_node_bench [--scale F] [--throttle-mib N] [--dir D] [section...]
// --scale shrinks the file counts and sizes (0.01 for a quick look); the data under --dir
// (default /var/tmp/granary-bench) is reused between runs.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "bench/bench_data.h"
#include "bench/cpu_time.h"
#include "bench/generated_bucket.h"
#include "bench/resident_memory.h"
#include "cache-node/grpc_peers.h"
#include "cache-node/grpc_service.h"
#include "common/flags.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/origin/s3_origin.h"
#include "granary/v1/cache_node.grpc.pb.h"
#include "tests/support/free_port.h"
#include "tests/support/http_file_server.h"

namespace granary::cache {
namespace {

using namespace granary::bench;

struct Args : DataArgs {
  int concurrency = 16;  // warm fetches in flight
  int nodes = 32;        // the spread section's cache node processes
  std::set<std::string> sections;
  // The memory section lists a generated S3 bucket (bench/generated_bucket.h) instead of a tree.
  bool generatedListing = false;
  // The generated bucket's time per listing request: -1 for the section's own (listers and
  // set-listing 20 ms, resume none).
  int pageLatencyMs = -1;
  int listers = 8;      // the listers section's listing requests side by side
  int pageKeys = 1000;  // set-listing: the most keys the generated bucket gives a page
  std::set<int> sets;   // set-listing: the sizes of the sets listed; empty for 1, 4 and nodes
};

// An engine of its own in `state`, serving gRPC on loopback.
struct BenchNode {
  BenchNode(const fs::path& state, const std::string& name, int64_t quota, int concurrency)
      : peers({.token = Secret("bench")}) {
    fs::remove_all(state);
    EngineOptions options{.nodeName = name,
                          .stateDirectory = state,
                          .cacheDirectories = {{state / "cache", quota}},
                          .warmConcurrency = concurrency,
                          .verifyChecksumsAtStart = false};
    auto opened = CacheEngine::open(options, realClock(), &peers, nullptr);
    if (!opened.isOk()) {
      std::fprintf(stderr, "engine: %s\n", opened.status().message().c_str());
      std::exit(1);
    }
    engine = std::move(*opened);
    auto started = CacheNodeServer::start(*engine, peers,
                                          {.address = "127.0.0.1:0", .token = Secret("bench")});
    if (!started.isOk()) std::exit(1);
    server = std::move(*started);
  }
  GrpcPeers peers;
  std::unique_ptr<CacheEngine> engine;
  std::unique_ptr<CacheNodeServer> server;
};

constexpr const char* kVersionedIndex = "index-versions.json";

// makeDataset, and beside it an index that names each file's version as the server heads it
// (civetweb's ETag: mtime and size): files pinned by their size alone are only ever read whole,
// from the origin, and only up to 64 MiB.
int64_t makeVersionedDataset(const fs::path& root, const std::string& name, int count,
                             int64_t size) {
  const int64_t total = makeDataset(root, name, count, size);
  std::string index = "{\"files\":[";
  bool first = true;
  for (const auto& e : fs::recursive_directory_iterator(root / name)) {
    if (!e.is_regular_file() || e.path().extension() == ".json") continue;
    struct stat st {};
    ::stat(e.path().c_str(), &st);
    char etag[64];
    std::snprintf(etag, sizeof etag, "\\\"%lx.%lld\\\"", static_cast<unsigned long>(st.st_mtime),
                  static_cast<long long>(st.st_size));
    index += std::string(first ? "" : ",") + "{\"path\":\"" +
             fs::relative(e.path(), root / name).string() +
             "\",\"size\":" + std::to_string(st.st_size) + ",\"etag\":\"" + etag + "\"}";
    first = false;
  }
  std::ofstream(root / name / kVersionedIndex) << index << "]}";
  return total;
}

EnsureSpec specFor(const std::string& url, const std::string& name, std::vector<std::string> nodes,
                   int replicas) {
  EnsureSpec spec;
  spec.key = {"bench", name, 1, "u"};
  spec.mounts.push_back({"", SourceSpec{.uri = url, .options = {{"index", kVersionedIndex}}}});
  spec.settings.nodeSet = std::move(nodes);
  spec.settings.replicas = replicas;
  spec.settings.chunkSize = 16 << 20;
  return spec;
}

std::shared_ptr<DatasetCache> ensureOrDie(CacheEngine& engine, EnsureSpec spec) {
  auto cache = engine.ensure(std::move(spec));
  if (!cache.isOk()) {
    std::fprintf(stderr, "ensure: %s\n", cache.status().message().c_str());
    std::exit(1);
  }
  return *cache;
}

DatasetState settle(DatasetCache& cache) {
  DatasetState state = cache.waitSettled(std::chrono::hours(2));
  if (state.phase != Phase::kReady) {
    std::fprintf(stderr, "dataset did not get Ready: %s %s\n",
                 std::string(phaseName(state.phase)).c_str(), state.message.c_str());
    std::exit(1);
  }
  return state;
}

// Plain parallel GETs of files straight from the throttled server: what the throttle gives a
// client that does nothing but download (a 20 s sample), or (with `copyTo`) that downloads every
// file and writes it to disk, as a copy tool would (the whole dataset, the warm's own bytes).
double plainDownloadRate(const std::string& url, const fs::path& dir, int threads,
                         const fs::path& copyTo = {}) {
  const std::vector<std::string> files = filesUnder(dir);
  std::atomic<size_t> next{0};
  std::atomic<int64_t> bytes{0};
  const auto start = Clock_::now();
  std::vector<std::jthread> workers;
  const double budget = copyTo.empty() ? 20 : 1e9;  // seconds
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      auto origin = makeOrigin(SourceSpec{.uri = url});
      for (size_t i; (i = next++) < files.size() && seconds(start) < budget;) {
        const auto size = static_cast<int64_t>(fs::file_size(dir / files[i]));
        const int fd = copyTo.empty() ? -1
                                      : ::open((copyTo / std::to_string(i)).c_str(),
                                               O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (int64_t off = 0; off < size; off += 16 << 20) {
          auto data = (*origin)->read(files[i], off, std::min<int64_t>(16 << 20, size - off), "");
          if (!data.isOk()) continue;
          bytes += static_cast<int64_t>(data->size());
          if (fd >= 0 && ::write(fd, data->data(), data->size()) < 0) std::exit(1);
        }
        if (fd >= 0) ::close(fd);
      }
    });
  }
  workers.clear();
  return static_cast<double>(bytes) / seconds(start);
}

void warmSection(const Args& args, const std::string& name, int count, int64_t size) {
  const int64_t total = makeVersionedDataset(args.dir / "origin", name, count, size);
  auto server = testing::HttpFileServer::start(args.dir / "origin" / name);
  if (!server.isOk()) std::exit(1);
  (*server)->throttle(args.throttle);
  // Earlier runs' files go first: a file system allocates inodes slowly among ones deleted in
  // the last minute, so neither measurement may follow a deletion.
  fs::remove_all(args.dir / "warm-node");
  fs::remove_all(args.dir / "copy");
  fs::create_directories(args.dir / "copy");
  const double plain = plainDownloadRate((*server)->url(), args.dir / "origin" / name, 16);
  quietDiskWarmOrigin(args.dir / "origin" / name);  // the same start for each measurement
  const double copy =
      plainDownloadRate((*server)->url(), args.dir / "origin" / name, 16, args.dir / "copy");
  quietDiskWarmOrigin(args.dir / "origin" / name);
  BenchNode node(args.dir / "warm-node", "n1", total * 2, args.concurrency);
  const auto start = Clock_::now();
  auto cache = ensureOrDie(*node.engine, specFor((*server)->url(), name, {"n1"}, 1));
  const DatasetState state = settle(*cache);
  const double all = seconds(start);
  // The warm pass alone: from its start (after listing and counting the owned share) to Ready.
  const double pass =
      std::chrono::duration<double>(std::chrono::system_clock::now() - state.progress.warmStart)
          .count();
  const double throttle = static_cast<double>(args.throttle);
  fs::remove_all(args.dir / "copy");
  std::printf(
      "warm %-22s throttle %5.1f MiB/s (16-thread download %5.1f, download+write %5.1f)   "
      "warm pass %6.1f MiB/s ratio %.3f (target >= 0.9)   with listing %6.1f MiB/s ratio %.3f "
      "(listing %.1f s)\n",
      (std::to_string(count) + " x " + std::to_string(size / 1024) + " KiB").c_str(),
      mib(args.throttle), mib(plain), mib(static_cast<int64_t>(copy)),
      mib(static_cast<int64_t>(total / pass)), static_cast<double>(total) / pass / throttle,
      mib(static_cast<int64_t>(total / all)), static_cast<double>(total) / all / throttle,
      all - pass);
}

void originSection(const Args& args) {
  const int count = std::max(200, static_cast<int>(20000 * args.scale));
  const int64_t total = makeVersionedDataset(args.dir / "origin", "spread", count, 100 * 1024);
  auto server = testing::HttpFileServer::start(args.dir / "origin" / "spread");
  if (!server.isOk()) std::exit(1);
  const auto run = [&](bool placement) {
    const int64_t before = (*server)->bytesServed();
    std::vector<std::unique_ptr<BenchNode>> nodes;
    std::vector<std::string> names = {"n1", "n2", "n3", "n4"};
    for (const auto& name : names)
      nodes.push_back(
          std::make_unique<BenchNode>(args.dir / ("spread-" + name), name, total * 2, 8));
    for (auto& a : nodes)
      for (size_t i = 0; i < nodes.size(); ++i)
        a->peers.setAddress(names[i], "127.0.0.1:" + std::to_string(nodes[i]->server->port()));
    std::vector<std::shared_ptr<DatasetCache>> caches;
    for (size_t i = 0; i < nodes.size(); ++i) {
      // Without placement every node is its own, whole-dataset node set.
      caches.push_back(ensureOrDie(
          *nodes[i]->engine,
          specFor((*server)->url(), "spread", placement ? names : std::vector{names[i]}, 1)));
    }
    int64_t owned = 0;
    for (auto& cache : caches) owned += settle(*cache).progress.ownedBytes;
    (void)owned;
    return static_cast<double>((*server)->bytesServed() - before) / static_cast<double>(total);
  };
  const double granary = run(true);
  const double independent = run(false);
  std::printf(
      "origin bytes / dataset, 4 nodes, %d files: granary (replicas 1, peers) %.4f   each node "
      "on its own %.4f   (target <= 1.01)\n",
      count, granary, independent);
}

// ---- spread: one dataset warmed by many granary-cache-node processes ----

constexpr const char* kSpreadToken = "spread-bench-token";

std::unique_ptr<grpc::ClientContext> authorized() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->AddMetadata("authorization", std::string("Bearer ") + kSpreadToken);
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  return context;
}

// A granary-cache-node process on a loopback port, talked to over its CacheNode API; killed
// (SIGKILL) when it goes.
class NodeChild {
 public:
  // `options`: more lines of its options file.
  NodeChild(const fs::path& dir, std::string name, int64_t quota, const std::string& options = "")
      : name_(std::move(name)), port_(testing::freePort()) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "token") << kSpreadToken << "\n";
    std::ofstream(dir / "config.yaml")
        << "nodeName: " << name_ << "\nlisten: 127.0.0.1:" << port_
        << "\ntransferListen: 127.0.0.1:" << testing::freePort()
        << "\nmetricsAddress: \"\"\ntokenFile: " << (dir / "token")
        << "\nstateDirectory: " << (dir / "state")
        << "\ncacheDirectories:\n  - path: " << (dir / "cache") << "\n    quota: " << quota
        << "\nwarmConcurrency: 4\nmountKeeper: false\ngpuTelemetry: false\nlogLevel: warn\n"
        << options;
    pid_ = ::fork();
    if (pid_ == 0) {
      std::freopen((dir / "log").c_str(), "w", stderr);
      ::execl(GRANARY_CACHE_NODE_BINARY, "granary-cache-node", "--config",
              (dir / "config.yaml").c_str(), nullptr);
      ::_exit(127);
    }
    channel_ = grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
    if (!channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(60))) {
      std::fprintf(stderr, "%s did not start (its log: %s)\n", name_.c_str(),
                   (dir / "log").c_str());
      std::exit(1);
    }
    stub_ = v1::CacheNode::NewStub(channel_);
  }
  ~NodeChild() { kill(); }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  const std::string& name() const { return name_; }
  // The CPU time it has spent so far.
  std::chrono::nanoseconds cpu() const {
    clockid_t clock;
    return ::clock_getcpuclockid(pid_, &clock) == 0 ? cpuTime(clock) : std::chrono::nanoseconds{-1};
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  v1::CacheNode::Stub& api() { return *stub_; }

 private:
  std::string name_;
  int port_;
  pid_t pid_ = -1;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CacheNode::Stub> stub_;
};

v1::DatasetRef spreadDataset() {
  v1::DatasetRef ref;
  ref.set_namespace_("bench");
  ref.set_name("spread");
  ref.set_generation(1);
  ref.set_uid("u");
  return ref;
}

void ensureOn(NodeChild& node, const std::string& url, const std::vector<NodeChild*>& nodeSet) {
  v1::EnsureDatasetRequest request;
  *request.mutable_dataset() = spreadDataset();
  auto* source = request.add_mounts()->mutable_source();
  source->set_uri(url);
  (*source->mutable_options())["index"] = kVersionedIndex;
  request.mutable_cache()->set_replicas(1);
  request.mutable_cache()->set_chunk_size_bytes(16 << 20);
  for (NodeChild* member : nodeSet) {
    auto* endpoint = request.add_node_set();
    endpoint->set_node_name(member->name());
    endpoint->set_address(member->address());
  }
  v1::EnsureDatasetResponse response;
  const grpc::Status status = node.api().EnsureDataset(authorized().get(), request, &response);
  if (!status.ok()) {
    std::fprintf(stderr, "ensure on %s: %s\n", node.name().c_str(), status.error_message().c_str());
    std::exit(1);
  }
}

v1::DatasetStatus statusOn(NodeChild& node) {
  v1::GetDatasetStatusRequest request;
  *request.mutable_dataset() = spreadDataset();
  v1::DatasetStatus status;
  (void)node.api().GetDatasetStatus(authorized().get(), request, &status);
  return status;
}

// Waits until every node of `nodes` is Ready; their statuses then.
std::vector<v1::DatasetStatus> waitAllReady(const std::vector<NodeChild*>& nodes) {
  while (true) {
    std::vector<v1::DatasetStatus> statuses;
    for (NodeChild* node : nodes) statuses.push_back(statusOn(*node));
    if (std::all_of(statuses.begin(), statuses.end(), [](const v1::DatasetStatus& s) {
          return s.phase() == v1::DATASET_PHASE_READY;
        }))
      return statuses;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Reads `path` whole through `node`; whether it is the origin's copy.
bool readsRight(NodeChild& node, const fs::path& origin, const std::string& path) {
  v1::ReadRequest request;
  *request.mutable_dataset() = spreadDataset();
  request.set_path(path);
  request.set_length(-1);
  auto context = authorized();
  auto reader = node.api().Read(context.get(), request);
  std::string data;
  for (v1::ReadResponse piece; reader->Read(&piece);) data += piece.data();
  std::ifstream in(origin / path, std::ios::binary);
  const std::string expected(std::istreambuf_iterator<char>(in), {});
  return reader->Finish().ok() && data == expected;
}

// Reads every file once, each through the next node in turn (4 readers); the files that differ.
int wrongFiles(const std::vector<NodeChild*>& nodes, const fs::path& origin,
               const std::vector<std::string>& files) {
  std::atomic<size_t> next{0};
  std::atomic<int> wrong{0};
  {
    std::vector<std::jthread> readers;
    for (int t = 0; t < 4; ++t) {
      readers.emplace_back([&] {
        for (size_t i; (i = next++) < files.size();)
          if (!readsRight(*nodes[i % nodes.size()], origin, files[i])) ++wrong;
      });
    }
  }
  return wrong;
}

double meanOf(const std::vector<double>& values) {
  double mean = 0;
  for (double v : values) mean += v / static_cast<double>(values.size());
  return mean;
}

// The spread of `values` around their mean: the largest deviation, as a fraction of the mean.
double spreadOf(const std::vector<double>& values) {
  const double mean = meanOf(values);
  double worst = 0;
  for (double v : values) worst = std::max(worst, std::abs(v - mean) / std::max(mean, 1.0));
  return worst;
}

// `--nodes` processes warm one dataset of 100 KB files from a throttled web server, replicas
// 1: the origin's bytes ÷ the dataset, each node's share and what it fetched from peers against
// the mean, and the warm rate against the throttle. Then again with one node killed (SIGKILL)
// a third of the way through and the others given the smaller node set: the origin's bytes
// then, and every byte read through every node left, compared with the origin.
void spreadSection(const Args& args) {
  const int count = std::max(500, static_cast<int>(50'000 * args.scale));
  const std::string name = "spread-" + std::to_string(count);
  const int64_t total = makeVersionedDataset(args.dir / "origin", name, count, 100 * 1024);
  const fs::path origin = args.dir / "origin" / name;
  auto server = testing::HttpFileServer::start(origin);
  if (!server.isOk()) std::exit(1);
  (*server)->throttle(args.throttle);
  const std::vector<std::string> files = filesUnder(origin);

  for (const bool killOne : {false, true}) {
    std::vector<std::unique_ptr<NodeChild>> children;
    std::vector<NodeChild*> nodes;
    for (int i = 0; i < args.nodes; ++i) {
      children.push_back(std::make_unique<NodeChild>(
          args.dir / ("spread-node-" + std::to_string(i)), "n" + std::to_string(i), total));
      nodes.push_back(children.back().get());
    }
    const int64_t before = (*server)->bytesServed();
    const int64_t indexBefore = (*server)->bytesServedOf(kVersionedIndex);
    const auto start = Clock_::now();
    for (NodeChild* node : nodes) ensureOn(*node, (*server)->url(), nodes);
    std::string killed;
    if (killOne) {
      // A third of the way: the origin has served a third of the dataset.
      while ((*server)->bytesServed() - before < total / 3)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      killed = nodes.back()->name();
      nodes.back()->kill();
      nodes.pop_back();
      for (NodeChild* node : nodes) ensureOn(*node, (*server)->url(), nodes);
    }
    waitAllReady(nodes);
    const double took = seconds(start);
    const int64_t served = (*server)->bytesServed() - before;
    const int wrong = wrongFiles(nodes, origin, files);
    const int64_t servedToReaders = (*server)->bytesServed() - before - served;
    std::vector<double> shares, peerReads;
    for (NodeChild* node : nodes) {
      const v1::DatasetStatus status = statusOn(*node);
      shares.push_back(static_cast<double>(status.progress().owned_bytes()));
      peerReads.push_back(static_cast<double>(status.reads().peer_bytes()));
    }
    // One node lists the origin and the others follow it: its index is read once, unless a node
    // had to list for itself.
    const double listings =
        static_cast<double>((*server)->bytesServedOf(kVersionedIndex) - indexBefore);
    const double indexReads =
        listings / static_cast<double>(fs::file_size(origin / kVersionedIndex));
    const double originRatio = static_cast<double>(served) / static_cast<double>(total);
    const double dataRatio = (static_cast<double>(served) - listings) / static_cast<double>(total);
    if (!killOne) {
      std::printf(
          "spread %d nodes (processes), %d x 100 KB, replicas 1: origin bytes / dataset %.4f "
          "(target <= 1.01), of which the origin's index (read %.0f times) %.4f: the files "
          "%.4f\n"
          "  each node's share within %.1f %% of the mean, %.1f MiB (target <= 20 %%); reading "
          "every file once, each through the next node: each node's peer reads within %.1f %% of "
          "the mean, %.1f MiB\n"
          "  warmed in %.1f s: %.1f MiB/s = %.3f x the origin's throttle of %.0f MiB/s (target >= "
          "0.9); %d of %zu files read wrong (the origin served %.1f MiB of those reads)\n",
          args.nodes, count, originRatio, indexReads, listings / static_cast<double>(total),
          dataRatio, 100 * spreadOf(shares), mib(static_cast<int64_t>(meanOf(shares))),
          100 * spreadOf(peerReads), mib(static_cast<int64_t>(meanOf(peerReads))), took,
          mib(total) / took, static_cast<double>(total) / took / static_cast<double>(args.throttle),
          mib(args.throttle), wrong, files.size(), mib(servedToReaders));
      continue;
    }
    std::printf(
        "  %s killed a third of the way: origin bytes / dataset %.4f, the origin's index read %.0f "
        "times, the files %.4f (at most 1 + its share, %.4f); the %zu nodes left re-owned its "
        "share and were Ready in %.1f s; %d "
        "of %zu files read wrong through them\n",
        killed.c_str(), originRatio, indexReads, dataRatio, 1.0 + 1.0 / args.nodes, nodes.size(),
        took, wrong, files.size());
  }
}

// Reads every file in 1 MiB pieces with `threads` readers through `read`.
double readRate(const std::vector<std::string>& files, int64_t size, int threads,
                const std::function<int64_t(const std::string&, int64_t, int64_t)>& read) {
  std::atomic<size_t> next{0};
  std::atomic<int64_t> bytes{0};
  const auto start = Clock_::now();
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (size_t i; (i = next++) < files.size();) {
          for (int64_t off = 0; off < size; off += 1 << 20)
            bytes += read(files[i], off, std::min<int64_t>(1 << 20, size - off));
        }
      });
    }
  }
  return static_cast<double>(bytes) / seconds(start);
}

void readSection(const Args& args, const std::string& name, int count, int64_t size) {
  const int64_t total = makeVersionedDataset(args.dir / "origin", name, count, size);
  const fs::path origin = args.dir / "origin" / name;
  auto server = testing::HttpFileServer::start(origin);
  if (!server.isOk()) std::exit(1);
  BenchNode node(args.dir / "read-node", "n1", total * 2, 16);
  auto cache = ensureOrDie(*node.engine, specFor((*server)->url(), name, {"n1"}, 1));
  settle(*cache);
  std::vector<std::string> files;
  for (int i = 0; i < count; ++i)
    files.push_back("d" + std::to_string(i % 100) + "/f" + std::to_string(i) + ".bin");
  std::mt19937 shuffle(1);
  std::shuffle(files.begin(), files.end(), shuffle);
  const int threads = 4;
  dropPageCache();
  const double direct = readRate(
      files, size, threads, [&](const std::string& f, int64_t off, int64_t len) -> int64_t {
        const int fd = ::open((origin / f).c_str(), O_RDONLY);
        std::string buffer(static_cast<size_t>(len), '\0');
        const ssize_t n = ::pread(fd, buffer.data(), static_cast<size_t>(len), off);
        ::close(fd);
        return n;
      });
  dropPageCache();
  const double engine = readRate(
      files, size, threads, [&](const std::string& f, int64_t off, int64_t len) -> int64_t {
        auto piece = cache->readPiece(f, off, len);
        return piece.isOk() ? static_cast<int64_t>(piece->data.size()) : 0;
      });
  const DatasetState state = cache->state();
  std::printf(
      "read %-28s engine %8.1f MiB/s   direct from disk %8.1f MiB/s   ratio %.3f (target >= "
      "0.9)   local bytes %.0f%%\n",
      (std::to_string(count) + " x " + std::to_string(size / 1024) + " KiB").c_str(), mib(engine),
      mib(direct), engine / direct,
      100.0 * static_cast<double>(state.reads.localBytes) /
          static_cast<double>(
              std::max<int64_t>(1, state.reads.localBytes + state.reads.originBytes)));
}

struct NodeHolding {
  ResidentMemory memory;
  double readySeconds = 0;  // from the process's start until the dataset was Ready
  // From the process's start until the first file the listing found could be looked up (-1:
  // never seen before Ready).
  double firstFileSeconds = -1;
  // Where the node was killed -9 and started again (see nodeMemory's killAt): the seconds from
  // the first start and the files listed then; readySeconds then counts from the second start.
  double killedSeconds = -1;
  int64_t killedFiles = 0;
  int64_t readyFiles = 0;  // the files the Ready node says it holds
};

// The first file a file:// origin's listing hands over: the first path in key order (its walk
// sorts each directory's names as the paths below them sort, a directory's as if it ended in /).
std::string firstListedFile(const fs::path& directory, const std::string& prefix = "") {
  std::vector<std::pair<std::string, bool>> entries;  // the name as it sorts; a directory's
  for (const auto& entry : fs::directory_iterator(directory)) {
    const bool isDirectory = entry.is_directory();
    if (isDirectory || entry.is_regular_file())
      entries.emplace_back(entry.path().filename().string() + (isDirectory ? "/" : ""),
                           isDirectory);
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& [name, isDirectory] : entries) {
    if (!isDirectory) return prefix + name;
    if (std::string found = firstListedFile(directory / name, prefix + name); !found.empty())
      return found;
  }
  return "";
}

// The memory and resume sections' dataset, bench/tree.
v1::DatasetRef treeDataset() {
  v1::DatasetRef ref;
  ref.set_namespace_("bench");
  ref.set_name("tree");
  return ref;
}

// The status of bench/tree on `node` (empty when it cannot say).
v1::DatasetStatus statusOf(v1::CacheNode::Stub& node) {
  v1::GetDatasetStatusRequest request;
  *request.mutable_dataset() = treeDataset();
  v1::DatasetStatus status;
  (void)node.GetDatasetStatus(authorized().get(), request, &status);
  return status;
}

// Whether `node` serves `path` of bench/tree yet. Asked only once the listing has stored some
// files (status), so that the Stat never waits for the listing's end.
bool fileServed(v1::CacheNode::Stub& node, const std::string& path) {
  const v1::DatasetStatus status = statusOf(node);
  if (status.progress().total_files() == 0) return false;
  v1::StatRequest stat;
  *stat.mutable_dataset() = treeDataset();
  stat.set_path(path);
  v1::FileInfo info;
  return node.Stat(authorized().get(), stat, &info).ok();
}

// The tree of `files` empty files the memory section lists (generated once, reused).
fs::path memoryTree(const Args& args, int64_t files) {
  const fs::path tree = args.dir / "origin" / ("tree-" + std::to_string(files));
  if (!fs::exists(tree.string() + ".done")) {
    fs::remove_all(tree);
    for (int64_t i = 0; i < files; ++i) {
      const fs::path file =
          tree / ("d" + std::to_string(i / 1000)) / ("sample-" + std::to_string(i) + ".jpg");
      if (i % 1000 == 0) fs::create_directories(file.parent_path());
      const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::close(fd);
    }
    std::ofstream(tree.string() + ".done") << "ok";
  }
  return tree;
}

// What the memory section's node lists: the Dataset's `spec.source` (YAML flow mapping) and the
// first file its listing hands over.
struct MemorySource {
  std::string specSource;
  std::string firstFile;
};

// Resident memory (VmRSS, VmHWM) of a granary-cache-node holding `files` files of `source` (warm
// Never) once it is Ready, and how long it took to be Ready (listing the origin). With `killAt`
// (a fraction), the node is killed -9 once it listed that share of the files, and started again
// on the same state.
NodeHolding nodeMemory(const Args& args, int64_t files, const MemorySource& source,
                       double killAt = 0,
                       const std::function<void(v1::CacheNode::Stub&)>& whenReady = {},
                       const std::string& nodeOptions = "") {
  const fs::path state = args.dir / ("memory-node-" + std::to_string(files));
  fs::remove_all(state);
  fs::create_directories(state);
  std::ofstream(state / "dataset.yaml")
      << "apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: tree, namespace: "
         "bench}\nspec:\n  source: "
      << source.specSource << "\n  cache: {warm: Never}\n";
  std::ofstream(state / "token") << kSpreadToken << "\n";
  const std::string& first = source.firstFile;
  const std::string listen = "127.0.0.1:" + std::to_string(testing::freePort());
  const std::string dataset = (state / "dataset.yaml").string();
  std::vector<std::string> command{"granary-cache-node",
                                   "--state-dir",
                                   state.string(),
                                   "--listen",
                                   listen,
                                   "--transfer-listen",
                                   "127.0.0.1:0",
                                   "--metrics-address",
                                   "",
                                   "--dataset",
                                   dataset};
  if (!nodeOptions.empty()) {  // options beyond the flags, as a file (cache-node/options.h)
    std::ofstream(state / "options.yaml") << nodeOptions << "\n";
    command.insert(command.end(), {"--config", (state / "options.yaml").string()});
  }
  const auto start = std::chrono::steady_clock::now();
  const auto since = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const auto logText = [&] {
    std::ifstream log(state / "log");
    return std::string(std::istreambuf_iterator<char>(log), {});
  };
  // Connected once the node listens (gRPC's reconnect backoff would otherwise add seconds).
  const auto launch = [&] {
    const pid_t child = ::fork();
    if (child == 0) {
      std::freopen((state / "log").c_str(), "w", stderr);
      std::vector<char*> argv;
      for (auto& arg : command) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(GRANARY_CACHE_NODE_BINARY, argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 6000 && logText().find("msg=started") == std::string::npos; ++i) {
      if (::waitpid(child, nullptr, WNOHANG) == child) {
        std::fprintf(stderr, "cache_node_bench: the cache node did not start:\n%s",
                     logText().c_str());
        std::exit(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return child;
  };
  pid_t pid = launch();
  auto node =
      v1::CacheNode::NewStub(grpc::CreateChannel(listen, grpc::InsecureChannelCredentials()));
  NodeHolding holding;
  double restarted = 0;
  // Ready: the standalone progress line says so. Until then, whether the first file listed is
  // served yet.
  // A long listing says how far it got every minute.
  double firstFile = -1, nextProgress = 60;
  for (const auto giveUp = start + std::chrono::hours(4);
       std::chrono::steady_clock::now() < giveUp;) {
    if (logText().find("bench/tree Ready") != std::string::npos) break;
    if (firstFile < 0 && fileServed(*node, first)) {
      firstFile = since();
      std::printf("memory listing %lld files: the first file served after %.2f s\n",
                  static_cast<long long>(files), firstFile);
      std::fflush(stdout);
    }
    const int64_t listed =
        killAt > 0 && holding.killedSeconds < 0 ? statusOf(*node).progress().total_files() : 0;
    if (killAt > 0 && holding.killedSeconds < 0 &&
        listed >= static_cast<int64_t>(killAt * static_cast<double>(files))) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      holding.killedSeconds = since();
      holding.killedFiles = listed;
      std::filesystem::remove(state / "log");
      restarted = since();
      pid = launch();
      node =
          v1::CacheNode::NewStub(grpc::CreateChannel(listen, grpc::InsecureChannelCredentials()));
    }
    if (since() >= nextProgress) {
      std::printf("memory listing %lld files: %lld listed after %.0f s, RSS %.1f MiB\n",
                  static_cast<long long>(files),
                  static_cast<long long>(statusOf(*node).progress().total_files()), since(),
                  mib(residentMemory(std::to_string(pid)).current));
      nextProgress += 60;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(firstFile < 0 ? 10 : 100));
  }
  holding.readySeconds = since() - restarted;
  holding.firstFileSeconds = firstFile;
  holding.readyFiles = statusOf(*node).progress().total_files();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  holding.memory = residentMemory(std::to_string(pid));
  if (whenReady) whenReady(*node);
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  return holding;
}

// Seconds to walk the origin's tree alone, reading each entry's size (what listing a file://
// origin reads), from whatever state the kernel's caches are in.
double walkSeconds(const fs::path& tree, int64_t files) {
  const auto start = std::chrono::steady_clock::now();
  int64_t found = 0, bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(tree))
    if (entry.is_regular_file()) ++found, bytes += static_cast<int64_t>(entry.file_size());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (found != files)
    std::fprintf(stderr,
                 "cache_node_bench: the tree holds %lld files, %lld expected (%lld bytes)\n",
                 static_cast<long long>(found), static_cast<long long>(files),
                 static_cast<long long>(bytes));
  return seconds;
}

// The milliseconds --page-latency-ms gives, or the section's `fallback`.
int pageLatency(const Args& args, int fallback) {
  return args.pageLatencyMs >= 0 ? args.pageLatencyMs : fallback;
}

// Seconds to fetch and parse the generated bucket's listing alone: the node's own S3 origin,
// listing into nothing, in `parts` side by side.
double bucketListSeconds(const bench::GeneratedBucket& bucket, int64_t files, size_t parts = 1) {
  auto origin = makeS3Origin({.bucket = bench::GeneratedBucket::kBucket,
                              .endpoint = bucket.endpoint(),
                              .pathStyle = true});
  if (!origin.isOk()) std::exit(1);
  const auto start = std::chrono::steady_clock::now();
  const auto ranges = (*origin)->split(parts);
  if (!ranges.isOk()) std::exit(1);
  std::atomic<int64_t> found{0};
  std::vector<Status> listed(ranges->size());
  {
    std::vector<std::jthread> listers;
    for (size_t i = 0; i < ranges->size(); ++i) {
      listers.emplace_back([&, i] {
        listed[i] = (*origin)->listRange((*ranges)[i], [&](std::vector<OriginObject>&& batch) {
          found += static_cast<int64_t>(batch.size());
          return Status::ok();
        });
      });
    }
  }
  for (const Status& status : listed) {
    if (!status.isOk()) std::fprintf(stderr, "cache_node_bench: %s\n", status.message().c_str());
  }
  if (found != files) {
    std::fprintf(stderr, "cache_node_bench: the bucket listed %lld files of %lld\n",
                 static_cast<long long>(found.load()), static_cast<long long>(files));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The listing of a file:// tree and the walk of the same tree alone, from the same state of the
// kernel's caches: `cold` drops the page cache, dentries and inodes before each; warm runs each
// after the tree's metadata was read once. Prints the pair and returns the listing.
NodeHolding treeListing(const Args& args, int64_t files, const MemorySource& source, bool cold) {
  if (cold)
    dropPageCache();
  else
    (void)walkSeconds(memoryTree(args, files), files);  // the tree's metadata cached
  NodeHolding listed = nodeMemory(args, files, source);
  if (cold) dropPageCache();
  const double walked = walkSeconds(memoryTree(args, files), files);
  const double rate = static_cast<double>(files) / listed.readySeconds;
  std::printf(
      "memory listing %s: Ready %.1f s after start, %.0f files/s   walking the origin's tree "
      "alone %s: %.1f s, %.0f files/s   ratio %.2f\n",
      cold ? "cold (page cache, dentries and inodes dropped before each)"
           : "warm (the tree's metadata cached before each)",
      listed.readySeconds, rate, cold ? "cold" : "warm", walked,
      static_cast<double>(files) / walked, walked / listed.readySeconds);
  std::fflush(stdout);
  return listed;
}

void memorySection(const Args& args) {
  const int64_t files = std::max<int64_t>(1000, static_cast<int64_t>(1'000'000 * args.scale));
  std::optional<bench::GeneratedBucket> bucket;
  const auto sourceOf = [&](int64_t count) {
    if (!args.generatedListing) {
      const fs::path tree = memoryTree(args, count);
      return MemorySource{"{uri: \"file://" + tree.string() + "/\"}", firstListedFile(tree)};
    }
    bucket.emplace(count);
    return MemorySource{std::string("{uri: \"s3://") + bench::GeneratedBucket::kBucket +
                            "/\", endpoint: \"" + bucket->endpoint() + "\"}",
                        bench::GeneratedBucket::keyOf(0)};
  };
  const NodeHolding one = nodeMemory(args, 1, sourceOf(1));
  NodeHolding many;
  if (args.generatedListing) {  // in memory: no cache of the kernel's plays a part
    many = nodeMemory(args, files, sourceOf(files));
    const double alone = bucketListSeconds(*bucket, files);
    std::printf(
        "memory listing: Ready %.1f s after start, %.0f files/s   fetching and parsing the "
        "generated bucket's listing alone %.1f s, %.0f files/s   ratio %.2f\n",
        many.readySeconds, static_cast<double>(files) / many.readySeconds, alone,
        static_cast<double>(files) / alone, alone / many.readySeconds);
  } else {
    const MemorySource source = sourceOf(files);
    many = treeListing(args, files, source, true);
    (void)treeListing(args, files, source, false);
  }
  std::printf(
      "memory granary-cache-node holding %lld files: RSS %.1f MiB (peak %.1f)   holding 1 file: "
      "RSS %.1f MiB (peak %.1f)   (target <= 128 MiB at 10 M files, <= 1 GiB at 100 M)\n"
      "memory first file: served %.2f s after start, while the listing went on   (a reader that "
      "waited for the listing: %.1f s)\n",
      static_cast<long long>(files), mib(many.memory.current), mib(many.memory.peak),
      mib(one.memory.current), mib(one.memory.peak), many.firstFileSeconds, many.readySeconds);
}

// Every entry of the generated bucket's manifest on `node`, page by page, against the bucket's
// keys: directories d000000, d000001, ... holding sample-N.jpg of 0 bytes, 1,000 to each.
struct ManifestCheck {
  int64_t compared = 0, wrong = 0;
};

std::vector<v1::FileInfo> listedDirectory(v1::CacheNode::Stub& node, const v1::DatasetRef& dataset,
                                          const std::string& path) {
  std::vector<v1::FileInfo> entries;
  v1::ListDirectoryRequest request;
  *request.mutable_dataset() = dataset;
  request.set_path(path);
  do {
    v1::ListDirectoryResponse page;
    if (!node.ListDirectory(authorized().get(), request, &page).ok()) break;
    for (auto& entry : *page.mutable_entries()) entries.push_back(std::move(entry));
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return entries;
}

ManifestCheck checkGeneratedManifest(v1::CacheNode::Stub& node, int64_t files,
                                     const v1::DatasetRef& dataset = treeDataset()) {
  ManifestCheck check;
  const int64_t directories = (files + 999) / 1000;
  const auto root = listedDirectory(node, dataset, "");
  check.wrong += std::abs(static_cast<int64_t>(root.size()) - directories);
  int64_t n = 0;
  for (int64_t d = 0; d < directories; ++d) {
    const std::string dir = bench::GeneratedBucket::keyOf(d * 1000).substr(0, 7);
    if (d >= static_cast<int64_t>(root.size()) || root[d].path() != dir || !root[d].is_directory())
      ++check.wrong;
    const auto entries = listedDirectory(node, dataset, dir);
    const int64_t expected = std::min<int64_t>(1000, files - d * 1000);
    check.wrong += std::abs(static_cast<int64_t>(entries.size()) - expected);
    for (const auto& entry : entries) {
      ++check.compared;
      if (entry.path() != bench::GeneratedBucket::keyOf(n++) || entry.size() != 0 ||
          entry.is_directory())
        ++check.wrong;
    }
  }
  return check;
}

// A node killed -9 half-way through listing the generated bucket, started again on its state:
// how long until Ready after the restart, beside a whole listing of the same bucket.
void resumeSection(const Args& args) {
  const int64_t files = std::max<int64_t>(1000, static_cast<int64_t>(1'000'000 * args.scale));
  const bench::GeneratedBucket bucket(files, std::chrono::milliseconds(pageLatency(args, 0)));
  const MemorySource source{std::string("{uri: \"s3://") + bench::GeneratedBucket::kBucket +
                                "/\", endpoint: \"" + bucket.endpoint() + "\"}",
                            bench::GeneratedBucket::keyOf(0)};
  const NodeHolding whole = nodeMemory(args, files, source);
  ManifestCheck check;
  const NodeHolding cut = nodeMemory(args, files, source, 0.5, [&](v1::CacheNode::Stub& node) {
    check = checkGeneratedManifest(node, files);
  });
  std::printf(
      "resume listing %lld files, %d ms a page: killed -9 after %.1f s at %lld files listed "
      "(%.0f%%); Ready %.1f s after the restart, holding %lld files   a whole listing: Ready %.1f "
      "s   ratio %.2f\n",
      static_cast<long long>(files), pageLatency(args, 0), cut.killedSeconds,
      static_cast<long long>(cut.killedFiles),
      100.0 * static_cast<double>(cut.killedFiles) / static_cast<double>(files), cut.readySeconds,
      static_cast<long long>(cut.readyFiles), whole.readySeconds,
      cut.readySeconds / whole.readySeconds);
  std::printf(
      "resume manifest after the restart: %lld entries compared with the bucket's keys, "
      "%lld wrong or missing\n",
      static_cast<long long>(check.compared), static_cast<long long>(check.wrong));
}

// The generated bucket with a latency per page, as a remote store has: Ready of a node listing
// it one request at a time and of one listing --listers parts side by side, beside fetching and
// parsing it alone both ways; the parallel listing's manifest compared with the bucket.
void listersSection(const Args& args) {
  const int64_t files = std::max<int64_t>(1000, static_cast<int64_t>(1'000'000 * args.scale));
  const int latency = pageLatency(args, 20);
  const bench::GeneratedBucket bucket(files, std::chrono::milliseconds(latency));
  const MemorySource source{std::string("{uri: \"s3://") + bench::GeneratedBucket::kBucket +
                                "/\", endpoint: \"" + bucket.endpoint() + "\"}",
                            bench::GeneratedBucket::keyOf(0)};
  const NodeHolding one = nodeMemory(args, files, source, 0, {}, "listingConcurrency: 1");
  ManifestCheck check;
  const NodeHolding many = nodeMemory(
      args, files, source, 0,
      [&](v1::CacheNode::Stub& node) { check = checkGeneratedManifest(node, files); },
      "listingConcurrency: " + std::to_string(args.listers));
  const double aloneOne = bucketListSeconds(bucket, files);
  const double aloneMany = bucketListSeconds(bucket, files, static_cast<size_t>(args.listers));
  const auto rate = [&](double seconds) { return static_cast<double>(files) / seconds; };
  std::printf(
      "listers %lld files, %d ms a page: 1 lister Ready %.1f s (%.0f files/s)   %d listers Ready "
      "%.1f s (%.0f files/s)   speed-up %.2f\n"
      "listers fetching and parsing alone: 1 request at a time %.1f s (%.0f files/s)   %d side by "
      "side %.1f s (%.0f files/s)   granary with %d listers ÷ fetching alone with %d: %.2f\n"
      "listers manifest of the %d-lister node: %lld entries compared with the bucket's keys, %lld "
      "wrong or missing; RSS %.1f MiB (peak %.1f)\n",
      static_cast<long long>(files), latency, one.readySeconds, rate(one.readySeconds),
      args.listers, many.readySeconds, rate(many.readySeconds),
      one.readySeconds / many.readySeconds, aloneOne, rate(aloneOne), args.listers, aloneMany,
      rate(aloneMany), args.listers, args.listers, aloneMany / many.readySeconds, args.listers,
      static_cast<long long>(check.compared), static_cast<long long>(check.wrong),
      mib(many.memory.current), mib(many.memory.peak));
}

// The generated bucket (a latency per page) listed by sets of 1, 4 and --nodes cache node
// processes: each node of a set lists a share of the origin's parts and follows the others'
// shares; how long until every node is Ready, how many listing requests the bucket answered,
// and every node's manifest compared with the bucket's keys.
void setListingSection(const Args& args) {
  const int64_t files = std::max<int64_t>(1000, static_cast<int64_t>(1'000'000 * args.scale));
  const int latency = pageLatency(args, 20);
  const std::set<int> sets = args.sets.empty() ? std::set<int>{1, 4, args.nodes} : args.sets;
  // Room for every lister of the largest set, its delimited listing and a share listed by a
  // follower itself: S3 does not make listers wait for each other.
  const bench::GeneratedBucket bucket(files, std::chrono::milliseconds(latency), args.pageKeys,
                                      std::max(64, 3 * *sets.rbegin() * args.listers));
  const auto ensure = [&](NodeChild& node, const std::vector<NodeChild*>& nodeSet) {
    v1::EnsureDatasetRequest request;
    *request.mutable_dataset() = spreadDataset();
    auto* source = request.add_mounts()->mutable_source();
    source->set_uri(std::string("s3://") + bench::GeneratedBucket::kBucket + "/");
    source->set_endpoint(bucket.endpoint());
    request.mutable_cache()->set_warm(v1::WARM_MODE_NEVER);
    for (NodeChild* member : nodeSet) {
      auto* endpoint = request.add_node_set();
      endpoint->set_node_name(member->name());
      endpoint->set_address(member->address());
    }
    v1::EnsureDatasetResponse response;
    const grpc::Status status = node.api().EnsureDataset(authorized().get(), request, &response);
    if (!status.ok()) {
      std::fprintf(stderr, "ensure on %s: %s\n", node.name().c_str(),
                   status.error_message().c_str());
      std::exit(1);
    }
  };
  for (const int count : sets) {
    std::vector<std::unique_ptr<NodeChild>> children;
    std::vector<NodeChild*> nodes;
    for (int i = 0; i < count; ++i) {
      children.push_back(std::make_unique<NodeChild>(
          args.dir / ("listing-node-" + std::to_string(i)), "n" + std::to_string(i), 1 << 30,
          "listingConcurrency: " + std::to_string(args.listers) + "\n"));
      nodes.push_back(children.back().get());
    }
    const int64_t requestsBefore = bucket.listRequests();
    const auto cpu = [&] {
      std::chrono::nanoseconds all{0};
      for (NodeChild* node : nodes) all += node->cpu();
      return std::chrono::duration<double>(all).count();
    };
    const double cpuBefore = cpu();
    const auto start = Clock_::now();
    for (NodeChild* node : nodes) ensure(*node, nodes);  // one by one, as the operator does
    const double told = seconds(start);
    const auto statuses = waitAllReady(nodes);
    const double took = seconds(start);
    const double cpuSpent = cpu() - cpuBefore;
    const int64_t requests = bucket.listRequests() - requestsBefore;
    const double originListed =
        std::chrono::duration<double>(bucket.lastListAnswered() - start).count();
    int64_t wrongTotals = 0;
    for (const auto& status : statuses) wrongTotals += status.progress().total_files() != files;
    ManifestCheck check;
    for (NodeChild* node : nodes) {
      const ManifestCheck one = checkGeneratedManifest(node->api(), files, spreadDataset());
      check.compared += one.compared;
      check.wrong += one.wrong;
    }
    std::printf(
        "set-listing %lld files, %d ms and up to %d keys a page, %d node(s), %d listers: every "
        "node Ready %.1f s "
        "(%.0f files/s), the last node told after %.1f s, the origin's last listing request "
        "answered after %.1f s   the nodes' CPU time %.1f s (%.2f s a node)   listing "
        "requests %lld (one listing: %lld)   nodes holding another "
        "count: %lld   entries compared with the bucket's keys on every node %lld, wrong or "
        "missing %lld\n",
        static_cast<long long>(files), latency, args.pageKeys, count, args.listers, took,
        static_cast<double>(files) / took, told, originListed, cpuSpent, cpuSpent / count,
        static_cast<long long>(requests), static_cast<long long>(bucket.requestsOfOneListing()),
        static_cast<long long>(wrongTotals), static_cast<long long>(check.compared),
        static_cast<long long>(check.wrong));
    std::fflush(stdout);
  }
  // Last, as it takes as long as the one-node set: the sets' lines come as each ends.
  const double alone = bucketListSeconds(bucket, files, static_cast<size_t>(args.listers));
  std::printf("set-listing fetching and parsing alone with %d listers: %.1f s (%.0f files/s)\n",
              args.listers, alone, static_cast<double>(files) / alone);
}

void addFlags(CLI::App& app, Args& args) {
  addDataFlags(app, args);
  app.add_option("--concurrency", args.concurrency, "warm fetches in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--nodes", args.nodes, "the spread section's cache node processes")
      ->capture_default_str()
      ->check(CLI::Range(2, 256));
  app.add_flag("--generated-listing", args.generatedListing,
               "memory: list a generated S3 bucket (no files on disk) instead of a tree of files");
  app.add_option("--page-latency-ms", args.pageLatencyMs,
                 "listers, set-listing, resume: the generated bucket's time per listing request "
                 "(default: 20 for listers and set-listing, 0 for resume)")
      ->check(CLI::Range(0, 10000));
  app.add_option("--listers", args.listers, "listers, set-listing: the node's listingConcurrency")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  app.add_option("--page-keys", args.pageKeys,
                 "set-listing: the most keys the generated bucket gives a page (S3: 1000)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--sets", args.sets,
                 "set-listing: the sizes of the sets that list, e.g. --sets 4,32 (default: 1, 4 "
                 "and --nodes)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->check(CLI::Range(1, 256));
  app.add_option("section", args.sections,
                 "warm (warm-small, warm-big), origin, read, memory, resume, listers, set-listing, "
                 "spread (default: all but resume, listers, set-listing and spread)")
      ->check(CLI::IsMember({"warm", "warm-small", "warm-big", "origin", "read", "memory", "resume",
                             "listers", "set-listing", "spread"}));
}

}  // namespace
}  // namespace granary::cache

int main(int argc, char** argv) {
  using namespace granary::cache;
  Args args;
  CLI::App app(
      "The cache engine's warm, origin, read and memory figures, each next to its "
      "baseline.",
      "cache_node_bench");
  addFlags(app, args);
  if (auto code = granary::parseCommandLine(app, argc, argv)) return *code;
  if (args.sections.empty()) args.sections = {"warm", "origin", "read", "memory"};
  granary::configureLogging({.level = granary::LogLevel::kWarn});
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each figure as soon as it is measured
  const int small = std::max(100, static_cast<int>(100'000 * args.scale));
  const int64_t big = std::max<int64_t>(16 << 20, static_cast<int64_t>((1LL << 30) * args.scale));
  if (args.sections.contains("warm") || args.sections.contains("warm-small"))
    warmSection(args, "small-" + std::to_string(small), small, 100 * 1024);
  if (args.sections.contains("warm") || args.sections.contains("warm-big"))
    warmSection(args, "big-" + std::to_string(big), 4, big);
  if (args.sections.contains("origin")) originSection(args);
  if (args.sections.contains("read")) {
    readSection(args, "big-" + std::to_string(big), 4, big);
    readSection(args, "small-" + std::to_string(small), small, 100 * 1024);
  }
  if (args.sections.contains("memory")) memorySection(args);
  if (args.sections.contains("resume")) resumeSection(args);
  if (args.sections.contains("listers")) listersSection(args);
  if (args.sections.contains("set-listing")) setListingSection(args);
  if (args.sections.contains("spread")) spreadSection(args);
  return 0;
}
