// granaryctl run: a TrainingJob and its Datasets on this machine, from the same manifests a
// cluster takes (cli/local_job.h plans it, cli/local_run.h runs it).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/local_run.h"
#include "cli/worker_gang.h"
#include "common/api/rendezvous_notice.h"
#include "common/log.h"
#include "common/quantity.h"
#include "common/termination.h"

namespace granary::cli {
namespace {

constexpr const char* kRunUsage =
    "usage: granaryctl run -f FILE [-f FILE ...] [--job NAME] [--cache-dir DIR] "
    "[--cache-size SIZE]\n"
    "                      [--run-dir DIR] [--nvml-library PATH] [--refresh] [--plain]\n"
    "  runs the TrainingJob of FILE (files or directories of manifests) with its Datasets on\n"
    "  this machine: the cache in process, each dataset mounted read-only at RUN_DIR/<mountPath>,\n"
    "  spec.workers local processes (an elastic job: up to maxWorkers as the GPUs allow); a live\n"
    "  view while it runs, a summary at the end.\n"
    "  --cache-dir   the cache's state and chunks (default ~/.cache/granary)\n"
    "  --cache-size  the chunks' quota (default 10Gi)\n"
    "  --run-dir     where the datasets are mounted and the workers' logs go "
    "(default /tmp/granary-run)\n"
    "  --refresh     lists each dataset's origin again first: the job reads what it holds now,\n"
    "                and only the files added or changed since the cache's version are fetched\n"
    "  --plain       timestamped lines instead of the live view, even on a terminal\n"
    "  exit code: 0 success, the failing worker's code, 124 past activeDeadlineSeconds,\n"
    "  130 stopped (Ctrl-C), 1 bad manifests or a run that cannot start, 2 bad usage\n";

int usage(const std::string& message) {
  std::fprintf(stderr, "granaryctl run: %s\n%s", message.c_str(), kRunUsage);
  return 2;
}

struct RunFlags {
  std::vector<std::string> files;
  std::string job;
  std::string cacheDirectory;
  std::string cacheSize = "10Gi";
  std::string runDirectory = "/tmp/granary-run";
  std::string nvmlLibrary = gpu::Nvml::kLibrary;
  bool plain = false;
  bool refresh = false;
};

// XDG's cache folder for granary: $XDG_CACHE_HOME/granary, else ~/.cache/granary.
std::string defaultCacheDirectory() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/granary";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/var/tmp") + "/.cache/granary";
}

// A TCP port free on 127.0.0.1 now, for rank 0 to listen on (0 if none could be found).
int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}};
  socklen_t length = sizeof address;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}

// Fills `flags`; returns the usage error, "" when the arguments are good.
std::string parseRunFlags(const std::vector<std::string>& args, RunFlags& flags) {
  const std::map<std::string, std::string*> valued = {{"--job", &flags.job},
                                                      {"--cache-dir", &flags.cacheDirectory},
                                                      {"--cache-size", &flags.cacheSize},
                                                      {"--run-dir", &flags.runDirectory},
                                                      {"--nvml-library", &flags.nvmlLibrary}};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const bool file = arg == "-f" || arg == "--filename";
    const auto named = valued.find(arg);
    if (arg == "--plain") {
      flags.plain = true;
    } else if (arg == "--refresh") {
      flags.refresh = true;
    } else if (!file && named == valued.end()) {
      return "unexpected argument \"" + arg + "\"";
    } else if (i + 1 >= args.size()) {
      return arg + " needs a value";
    } else if (file) {
      flags.files.push_back(args[++i]);
    } else {
      *named->second = args[++i];
    }
  }
  if (flags.files.empty()) return "-f: name the file with the TrainingJob and its Datasets";
  if (flags.runDirectory.empty()) return "--run-dir: name a folder";
  if (flags.cacheDirectory.empty()) flags.cacheDirectory = defaultCacheDirectory();
  return "";
}

Result<std::vector<api::ManifestDocument>> loadAll(const std::vector<std::string>& files) {
  std::vector<api::ManifestDocument> all;
  for (const auto& file : files) {
    GRANARY_ASSIGN_OR_RETURN(auto documents, api::loadManifests(file));
    for (auto& document : documents) all.push_back(std::move(document));
  }
  return all;
}

int gpuCount(const cache::GpuSampler& sampler) {
  int count = 0;
  for (const auto& reading : sampler.latest()) count += reading.lost ? 0 : 1;
  return count;
}

}  // namespace

int runCommand(const std::vector<std::string>& args) {
  RunFlags flags;
  if (const std::string error = parseRunFlags(args, flags); !error.empty()) return usage(error);
  auto quota = parseByteSize(flags.cacheSize);
  if (!quota.isOk()) return usage("--cache-size: " + quota.status().message());
  std::stop_source stop = stopOnTerminationSignals();  // before any thread starts

  auto documents = loadAll(flags.files);
  if (!documents.isOk()) {
    std::fprintf(stderr, "granaryctl run: %s\n", documents.status().message().c_str());
    return 1;
  }
  // Without NVML the sampler warns in the log; here "no GPU" in the view says as much.
  configureLogging({.level = LogLevel::kError});
  auto sampler = cache::GpuSampler::start(
      {.library = flags.nvmlLibrary, .interval = std::chrono::seconds(1), .hostname = "local"},
      realClock(), nullptr);
  if (!sampler.isOk()) return usage(sampler.status().message());
  configureLogging({.level = LogLevel::kWarn});
  const LocalRunOptions options{
      .runDirectory = std::filesystem::absolute(flags.runDirectory).lexically_normal(),
      .jobName = flags.job,
      .gpuCount = gpuCount(**sampler),
      .noGpuReason = (*sampler)->unavailableReason(),
      .masterPort = freePort(),
      .rendezvousPort = freePort(),
      .rendezvousNoticePort = freePort(),
      .rendezvousToken = api::randomRendezvousToken()};
  auto plan = planLocalRun(*documents, options);
  if (!plan.isOk()) {
    std::fprintf(stderr, "granaryctl run: %s\n", plan.status().message().c_str());
    return 1;
  }
  for (const auto& worker : plan->workers)  // before anything is mounted or warmed
    if (auto program = WorkerGang::programOf(worker); !program.isOk()) {
      std::fprintf(stderr, "granaryctl run: %s\n", program.status().message().c_str());
      return 1;
    }
  const LocalRunSettings settings{.cacheDirectory = std::filesystem::absolute(flags.cacheDirectory),
                                  .cacheBytes = quota->bytes,
                                  .plain = flags.plain,
                                  .refresh = flags.refresh};
  return runLocally(*plan, settings, sampler->get(), stop.get_token());
}

}  // namespace granary::cli
