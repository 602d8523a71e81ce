// Readers of a dataset through a pod's view while the node changes hands, each figure beside its
// baseline measured in the same run:
//   hand-over   the DaemonSet replaces the node's pod (maxSurge): a new keeper and a new cache node
//               (new processes, the same state directory) start beside the old ones, take the
//               node over, and the old ones end (SIGTERM)
//   restart     the baseline, a restart of the cache-node container with its keeper kept: the node
//               stopped (SIGTERM), started again and its dataset ensured at once (the best case:
//               on a cluster the operator ensures it within seconds)
// For each event: the longest a single whole-file read took while it went on (the pause a reader
// saw), and how long from the event's start until the node (the new pod's, for a hand-over: the
// old one serves until it releases the node) answered again; then every read's
// failures and wrong bytes (each compared with the origin), which must be 0. Target: the longest
// read of a hand-over <= 2 s.
// Usage: handover_bench [--rounds N] [--files N] [--file-kib N] [--threads N] [--dir D]
// Needs root and /dev/fuse, and a kernel with FUSE_NOTIFY_RESEND (Linux 6.9+).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "common/flags.h"
#include "tests/support/cache_node_process.h"
#include "tests/support/http_file_server.h"
#include "tests/support/mount_readers.h"
#include "tests/support/scratch_tree.h"

namespace granary::bench {
namespace {

using Clock = std::chrono::steady_clock;
using testing::KeeperProcess;
using testing::NodeProcess;

struct Args {
  int rounds = 3;
  int files = 200;
  int fileKib = 256;
  int threads = 4;
  std::string dir = "/var/tmp/granary-handover-bench";
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "handover_bench: %s\n", what.c_str());
  std::exit(1);
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What a node serves: ml/coco over the origin, on one node.
v1::EnsureDatasetRequest ensureRequest(const std::string& origin, const NodeProcess& node) {
  v1::EnsureDatasetRequest request;
  request.mutable_dataset()->set_namespace_("ml");
  request.mutable_dataset()->set_name("coco");
  request.mutable_dataset()->set_generation(1);
  request.mutable_dataset()->set_uid("uid-1");
  request.add_mounts()->mutable_source()->set_uri(origin);
  request.mutable_cache()->set_replicas(1);
  auto* endpoint = request.add_node_set();
  endpoint->set_node_name(node.name());
  endpoint->set_address(node.address());
  return request;
}

bool ensure(NodeProcess& node, const v1::EnsureDatasetRequest& request) {
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + testing::kToken);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::EnsureDatasetResponse response;
  return node.api().EnsureDataset(&context, request, &response).ok();
}

bool servedReady(NodeProcess& node) {
  return testing::eventually(
      [&] {
        grpc::ClientContext context;
        context.AddMetadata("authorization", std::string("Bearer ") + testing::kToken);
        v1::GetDatasetStatusRequest request;
        request.mutable_dataset()->set_namespace_("ml");
        request.mutable_dataset()->set_name("coco");
        v1::DatasetStatus status;
        return node.api().GetDatasetStatus(&context, request, &status).ok() &&
               status.phase() == v1::DATASET_PHASE_READY;
      },
      std::chrono::seconds(120));
}

struct Event {
  std::string what;
  double longestRead = 0;  // s
  double servedAgain = 0;  // s from the event's start
};

int run(const Args& args) {
  const std::filesystem::path root = args.dir;
  testing::removeTree(root);
  std::map<std::string, std::string> files;
  std::mt19937 random(7);
  for (int i = 0; i < args.files; ++i) {
    std::string data(static_cast<size_t>(args.fileKib) << 10, '\0');
    for (auto& c : data) c = static_cast<char>(random());
    const std::string path = "train/part-" + std::to_string(i) + ".bin";
    std::filesystem::create_directories(root / "origin" / "train");
    std::ofstream(root / "origin" / path, std::ios::binary) << data;
    files[path] = std::move(data);
  }
  auto origin = testing::HttpFileServer::start(root / "origin");
  if (!origin.isOk()) die("origin: " + origin.status().message());

  const auto socket = root / "n1" / "state" / "keeper" / "keeper.sock";
  std::vector<std::unique_ptr<KeeperProcess>> keepers;
  keepers.push_back(std::make_unique<KeeperProcess>(socket));
  std::vector<std::unique_ptr<NodeProcess>> pods;
  pods.push_back(std::make_unique<NodeProcess>(root / "n1", "n1", nullptr, socket.string()));
  pods.back()->start();
  const auto request = ensureRequest((*origin)->url(), *pods.back());
  if (!ensure(*pods.back(), request) || !servedReady(*pods.back()))
    die("the dataset is not Ready; see " + (root / "n1" / "log").string());
  const auto target = root / "pods" / "uid-a" / "volumes" / "data";
  if (const auto published = testing::publishVolume(*pods.back(), target); !published.ok())
    die("publish: " + published.error_message());
  if (pods.back()->log().find("mount recovery on") == std::string::npos)
    die("this kernel cannot keep mounts across a restart; see " + (root / "n1" / "log").string());

  std::optional<testing::Readers> readers;
  readers.emplace(target, files, args.threads);
  if (!readers->waitFor(500)) die("the readers do not read");
  const int64_t perFile = args.files;
  std::vector<Event> events;
  const auto measure = [&](const std::string& what, Clock::time_point began,
                           Clock::time_point served) {
    readers->waitFor(2 * perFile);  // well past the event
    events.push_back(
        {what, seconds(readers->longestDuring(began, Clock::now())), seconds(served - began)});
    std::printf("%-12s longest read %.3f s, %s %.3f s\n", what.c_str(), events.back().longestRead,
                what.starts_with("restart") ? "served again after" : "the new pod served after",
                events.back().servedAgain);
    std::fflush(stdout);
  };
  for (int round = 1; round <= args.rounds; ++round) {  // the baseline first
    NodeProcess& node = *pods.back();
    const auto began = Clock::now();
    node.kill(SIGTERM);
    node.start();
    if (!ensure(node, request) || !servedReady(node)) die("the restarted node does not serve");
    measure("restart " + std::to_string(round), began, Clock::now());
  }
  for (int round = 1; round <= args.rounds; ++round) {
    keepers.push_back(std::make_unique<KeeperProcess>(socket));
    pods.push_back(std::make_unique<NodeProcess>(root / ("n1-pod-" + std::to_string(round)), "n1",
                                                 nullptr, socket.string(), root / "n1"));
    const auto began = Clock::now();
    pods.back()->start();  // serves its API once it took the node over
    if (!servedReady(*pods.back())) die("the new pod does not serve");
    const auto served = Clock::now();
    pods[pods.size() - 2]->kill(SIGTERM);  // the old pod ends
    keepers[keepers.size() - 2]->stop();
    measure("hand-over " + std::to_string(round), began, served);
  }
  readers->stop();

  const auto worst = [&](const std::string& prefix) {
    double longest = 0;
    for (const auto& e : events)
      if (e.what.starts_with(prefix)) longest = std::max(longest, e.longestRead);
    return longest;
  };
  std::printf("\n%lld whole files read (%d threads), %lld failed or wrong\n",
              static_cast<long long>(readers->completed()), args.threads,
              static_cast<long long>(readers->failed()));
  std::printf(
      "longest read: hand-over %.3f s (target <= 2 s), container restart %.3f s; "
      "ratio %.2f\n",
      worst("hand-over"), worst("restart"), worst("hand-over") / worst("restart"));
  std::fflush(stdout);
  const int64_t failed = readers->failed();
  readers.reset();
  pods.clear();
  keepers.clear();
  testing::removeTree(root);  // with the mounts the last keeper held
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace granary::bench

int main(int argc, char** argv) {
  granary::bench::Args args;
  CLI::App app("handover_bench: readers while the node's pod is replaced, beside a restart");
  app.add_option("--rounds", args.rounds, "hand-overs, and restarts, each (default 3)")
      ->check(CLI::Range(1, 100));
  app.add_option("--files", args.files, "files of the dataset (default 200)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--file-kib", args.fileKib, "KiB per file (default 256)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--threads", args.threads, "reading threads (default 4)")
      ->check(CLI::Range(1, 256));
  app.add_option("--dir", args.dir, "scratch directory (default /var/tmp/granary-handover-bench)");
  if (auto code = granary::parseCommandLine(app, argc, argv)) return *code;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "handover_bench: needs root (FUSE mounts)\n");
    return 2;
  }
  return granary::bench::run(args);
}
