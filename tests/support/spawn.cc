#include "tests/support/spawn.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

extern char** environ;

namespace granary::testing {

pid_t spawnProcess(const std::vector<std::string>& argv, const SpawnOptions& options) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (!options.env.contains(text.substr(0, text.find('=')))) env.push_back(text);
  }
  for (const auto& [name, value] : options.env) env.push_back(name + "=" + value);
  const auto pointers = [](std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
  };
  std::vector<std::string> args = argv;
  std::vector<char*> argp = pointers(args), envp = pointers(env);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, options.log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (options.stdoutToLog) posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = -1;
  const int error = ::posix_spawn(&pid, argp[0], &actions, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error == 0) return pid;
  std::ofstream(options.log, std::ios::app)
      << "cannot run " << argv.front() << ": " << std::strerror(error) << "\n";
  return -1;
}

}  // namespace granary::testing
