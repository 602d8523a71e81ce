// granaryctl mount / unmount: a Dataset as a read-only directory on this machine, without a
// cluster. The cache engine runs inside granaryctl; the mount lives as long as the command.
#include <sys/mount.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/log.h"
#include "common/quantity.h"
#include "common/termination.h"
#include "engine/engine.h"
#include "engine/local_versions.h"
#include "engine/mount/dataset_fs.h"
#include "engine/standalone.h"

namespace granary::cli {
namespace {

using namespace granary::cache;

constexpr const char* kMountUsage =
    "usage: granaryctl mount -f DATASET.yaml [--name NAME] [--state-dir DIR] [--cache-size SIZE] "
    "[--refresh] MOUNTPOINT\n"
    "  serves the Dataset read-only at MOUNTPOINT until `granaryctl unmount MOUNTPOINT` or "
    "Ctrl-C;\n  warms it meanwhile (state and cache default to /var/tmp/granary, 10Gi); "
    "--refresh lists the origin\n  again first and serves what it holds now, fetching only "
    "what changed\n";

int usage(const std::string& message) {
  std::fprintf(stderr, "granaryctl mount: %s\n%s", message.c_str(), kMountUsage);
  return 2;
}

// The file system type of the mount at `path` ("" when it is not a mount point).
std::string mountTypeAt(const std::filesystem::path& path) {
  std::string found;
  for (const auto& mount : currentMounts())
    if (mount.point == path.string()) found = mount.type;  // the last one is on top
  return found;
}

// The readers in a few lines: one per pod, or per command in local mode, with their totals. A
// group's data wait adds up its processes' own (each the wall time one of them had a read
// blocked), so a group of N readers may have waited up to N times as long as it ran.
void printReaders(const ReaderAccounting& accounting) {
  struct Group {
    int readers = 0;
    int64_t operations = 0, local = 0, fetched = 0;
    std::chrono::nanoseconds wait{0};
  };
  std::map<std::string, Group> groups;
  for (const auto& r : accounting.readers()) {
    const std::string name = !r.podName.empty()      ? "pod " + r.podNamespace + "/" + r.podName
                             : !r.key.podUid.empty() ? "pod " + r.key.podUid
                             : !r.command.empty()    ? r.command
                                                     : "pid " + std::to_string(r.key.pid);
    Group& g = groups[name];
    ++g.readers;
    g.operations += r.operations;
    g.local += r.reads.localBytes;
    g.fetched += r.reads.originBytes + r.reads.peerBytes;
    g.wait += r.wait;
  }
  for (const auto& [name, g] : groups) {
    std::fprintf(stderr, "  %s (%d reader%s): %lld reads, %s local, %s fetched, waited %.2f s\n",
                 name.c_str(), g.readers, g.readers == 1 ? "" : "s",
                 static_cast<long long>(g.operations), formatByteSize(ByteSize{g.local}).c_str(),
                 formatByteSize(ByteSize{g.fetched}).c_str(),
                 std::chrono::duration<double>(g.wait).count());
  }
}

}  // namespace

int mountCommand(const std::vector<std::string>& args) {
  std::string file, name, stateDir = "/var/tmp/granary", cacheSize = "10Gi", mountpoint;
  bool refresh = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto value = [&](std::string& into) {
      if (i + 1 >= args.size()) return false;
      into = args[++i];
      return true;
    };
    const std::string& arg = args[i];
    bool ok = true;
    if (arg == "-f" || arg == "--filename")
      ok = value(file);
    else if (arg == "--name")
      ok = value(name);
    else if (arg == "--state-dir")
      ok = value(stateDir);
    else if (arg == "--cache-size")
      ok = value(cacheSize);
    else if (arg == "--refresh")
      refresh = true;
    else if (!arg.starts_with("-") && mountpoint.empty())
      mountpoint = arg;
    else
      return usage("unexpected argument \"" + arg + "\"");
    if (!ok) return usage(arg + " needs a value");
  }
  if (file.empty()) return usage("-f: name the Dataset manifest");
  if (mountpoint.empty()) return usage("name the MOUNTPOINT");
  auto quota = parseByteSize(cacheSize);
  if (!quota.isOk()) return usage("--cache-size: " + quota.status().message());

  auto datasets = loadDatasets(file);
  if (!datasets.isOk()) {
    std::fprintf(stderr, "granaryctl mount: %s\n", datasets.status().message().c_str());
    return 1;
  }
  const api::Dataset* chosen = nullptr;
  for (const auto& d : *datasets)
    if (name.empty() || d.metadata.name == name) chosen = chosen ? chosen : &d;
  if (chosen == nullptr) return usage("--name: " + file + " has no Dataset \"" + name + "\"");
  if (datasets->size() > 1 && name.empty())
    return usage("--name: " + file + " holds several Datasets; choose one");

  configureLogging({.level = LogLevel::kWarn});
  std::stop_source stop = stopOnTerminationSignals();
  // Mounted first, served once the engine has the dataset: readers of a restarted mount wait
  // instead of finding the empty directory below it.
  cleanStaleMount(mountpoint);
  ReaderAccounting readers(nullptr);
  const EnsureSpec spec = standaloneSpec(*chosen);
  auto fs =
      DatasetFilesystem::mountPending(spec.key.label(), mountpoint, &readers, {.allowOther = true});
  if (!fs.isOk()) {
    std::fprintf(stderr, "granaryctl mount: %s\n", fs.status().message().c_str());
    return 1;
  }
  const std::filesystem::path stateRoot = stateDir;
  EngineOptions options{.nodeName = "local",
                        .stateDirectory = stateRoot,
                        .cacheDirectories = {{stateRoot / "cache", quota->bytes}}};
  options.origins.fileOriginRoots = fileSourcesOf({*chosen});  // what the user named
  auto engine = CacheEngine::open(options, realClock(), nullptr, nullptr);
  if (!engine.isOk()) {
    std::fprintf(stderr, "granaryctl mount: %s\n", engine.status().message().c_str());
    return 1;
  }
  auto cache = ensureNewestVersion(**engine, spec);
  if (cache.isOk() && refresh) {
    const auto say = [&](const std::string& line) {
      std::fprintf(stderr, "%s %s\n", spec.key.label().c_str(), line.c_str());
    };
    auto refreshed = refreshLocally(**engine, *cache, spec, stop.get_token(), listingReporter(say));
    if (refreshed.isOk()) {
      say(refreshed->summary);
      cache = std::move(refreshed->serving);
    } else {
      cache = refreshed.status();
    }
  }
  if (!cache.isOk()) {
    std::fprintf(stderr, "granaryctl mount: %s\n", cache.status().message().c_str());
    return 1;
  }
  (*fs)->serve(*cache);
  std::fprintf(stderr, "%s mounted read-only at %s (granaryctl unmount %s to stop)\n",
               (*cache)->key().label().c_str(), mountpoint.c_str(), mountpoint.c_str());
  std::pair<Phase, int64_t> printed{Phase::kPending, -1};  // a line when either changes
  bool retired = false;
  while (!stop.stop_requested() && (*fs)->serving()) {
    retired = retired || retireOlderVersions(**engine, **cache);
    const DatasetState state = (*cache)->state();
    if (std::pair(state.phase, state.progress.cachedBytes) != printed)
      std::fprintf(stderr, "%s\n", progressLine((*cache)->key(), state).c_str());
    printed = {state.phase, state.progress.cachedBytes};
    realClock().sleepUntil(realClock().monoNow() + std::chrono::seconds(1), stop.get_token());
  }
  fs->reset();  // unmounts, if it is still mounted
  std::fprintf(stderr, "unmounted %s\n", mountpoint.c_str());
  printReaders(readers);
  return 0;
}

int unmountCommand(const std::vector<std::string>& args) {
  bool lazy = false;
  std::string mountpoint;
  for (const auto& arg : args) {
    if (arg == "--lazy") {
      lazy = true;
    } else if (!arg.starts_with("-") && mountpoint.empty()) {
      mountpoint = arg;
    } else {
      std::fprintf(stderr, "usage: granaryctl unmount [--lazy] MOUNTPOINT\n");
      return 2;
    }
  }
  if (mountpoint.empty()) {
    std::fprintf(stderr, "usage: granaryctl unmount [--lazy] MOUNTPOINT\n");
    return 2;
  }
  const std::filesystem::path path = std::filesystem::absolute(mountpoint).lexically_normal();
  const std::string type = mountTypeAt(path);
  if (type != "fuse.granary") {
    std::fprintf(stderr, "granaryctl unmount: %s is not a granary mount%s\n", path.c_str(),
                 type.empty() ? "" : (" (it is " + type + ")").c_str());
    return 1;
  }
  if (::umount2(path.c_str(), lazy ? MNT_DETACH : 0) != 0) {
    const int error = errno;
    std::fprintf(stderr, "granaryctl unmount: %s: %s%s\n", path.c_str(), std::strerror(error),
                 error == EBUSY ? "; files are still open there (--lazy detaches it now and "
                                  "frees it when they close)"
                                : "");
    return 1;
  }
  return 0;
}

}  // namespace granary::cli
