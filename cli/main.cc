// granaryctl: granary's command-line tool.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"

namespace {

constexpr std::string_view kUsage = R"(granaryctl: granary's command-line tool

Usage:
  granaryctl validate -f PATH [-f PATH ...]   check Dataset and TrainingJob manifests (files
                                              or directories) and summarize them
  granaryctl run -f JOB.yaml                   run a TrainingJob and its Datasets on this
                                              machine, as on a cluster (local mode)
  granaryctl mount -f DATASET.yaml MOUNTPOINT  serve a Dataset read-only at MOUNTPOINT while
                                              warming it (until unmounted or Ctrl-C)
  granaryctl unmount [--lazy] MOUNTPOINT      end such a mount
  granaryctl doctor                           report this machine's GPUs and build features
  granaryctl version                          print the version
)";

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::fputs(kUsage.data(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string& command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "validate") return granary::cli::validateCommand(rest);
  if (command == "run") return granary::cli::runCommand(rest);
  if (command == "mount") return granary::cli::mountCommand(rest);
  if (command == "unmount") return granary::cli::unmountCommand(rest);
  if (command == "doctor") return granary::cli::doctorCommand(rest);
  if (command == "version") return granary::cli::versionCommand(rest);
  std::fprintf(stderr, "granaryctl: unknown command \"%s\"\n\n%s", command.c_str(), kUsage.data());
  return 2;
}
