// A program run by a test: started (spawnProcess) with its own argument list and environment
// additions, its stdout and stderr appended to a log file, and killed (SIGKILL) and reaped when
// the object goes.
#pragma once

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tests/support/spawn.h"

namespace granary::testing {

class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, std::filesystem::path log,
               std::map<std::string, std::string> env = {})
      : argv_(std::move(argv)), log_(std::move(log)), env_(std::move(env)) {}
  ~ChildProcess() { stop(SIGKILL); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void start() { pid_ = spawnProcess(argv_, {.log = log_, .stdoutToLog = true, .env = env_}); }

  // Sends `signal` and reaps the process; nothing when it is not running.
  void stop(int signal = SIGTERM) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // Whether it still runs (it has not exited).
  bool running() {
    if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) != 0) pid_ = -1;
    return pid_ > 0;
  }

  std::string log() const {
    std::ifstream in(log_);
    return {std::istreambuf_iterator<char>(in), {}};
  }

 private:
  std::vector<std::string> argv_;
  std::filesystem::path log_;
  std::map<std::string, std::string> env_;
  pid_t pid_ = -1;
};

}  // namespace granary::testing
