// Starting a helper process from a test that runs threads (gRPC, informers, drains). fork()
// copies only the calling thread: a child that allocates or takes a stdio lock before exec() may
// wait for ever on a lock another thread held at the fork. posix_spawn does the redirection and
// the exec without running any of this process's code in the child.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace granary::testing {

struct SpawnOptions {
  std::filesystem::path log;               // stderr is appended here (created when missing)
  bool stdoutToLog = false;                // stdout too; otherwise it is this process's
  std::map<std::string, std::string> env;  // on top of this process's environment
};

// Runs argv[0] (a path, not looked up on PATH) with `argv`. The child's pid, or -1 with the
// reason appended to the log when it cannot be started.
pid_t spawnProcess(const std::vector<std::string>& argv, const SpawnOptions& options);

}  // namespace granary::testing
