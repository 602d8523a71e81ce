#include "cli/worker_gang.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "common/clock.h"

extern char** environ;

namespace granary::cli {
namespace {

using namespace std::chrono_literals;

// Everything the child needs, prepared before fork(): between fork() and exec() the child may
// only make async-signal-safe calls, so it allocates nothing (another thread may have held the
// allocator's lock at the fork, and the child would wait on it forever).
struct Launch {
  std::string program;
  std::vector<std::string> argv, env;
  std::string workingDirectory;
  std::vector<char*> argvPointers, envPointers;  // execve's arrays, set by prepare()

  // Fills the pointer arrays; the strings must not move afterwards.
  void prepare() {
    argvPointers = pointers(argv);
    envPointers = pointers(env);
  }

  static std::vector<char*> pointers(std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
  }
};

// granaryctl's environment with the worker's on top.
std::vector<std::string> environmentFor(const LocalWorker& worker) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t equals = entry.find('=');
    if (equals != std::string::npos) merged[entry.substr(0, equals)] = entry.substr(equals + 1);
  }
  for (const auto& [name, value] : worker.env) merged[name] = value;
  std::vector<std::string> out;
  for (const auto& [name, value] : merged) out.push_back(name + "=" + value);
  return out;
}

[[noreturn]] void execChild(const Launch& launch, int output, int devNull, pid_t parent) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // granaryctl died before the line above
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // granaryctl blocks SIGTERM and SIGINT
  for (int sig : {SIGTERM, SIGINT, SIGPIPE}) ::signal(sig, SIG_DFL);
  ::dup2(devNull, STDIN_FILENO);
  ::dup2(output, STDOUT_FILENO);
  ::dup2(output, STDERR_FILENO);
  if (!launch.workingDirectory.empty() && ::chdir(launch.workingDirectory.c_str()) != 0) {
    const char* message = "granaryctl: cannot enter the container's workingDir\n";
    (void)!::write(STDERR_FILENO, message, std::strlen(message));
    ::_exit(127);
  }
  ::execve(launch.program.c_str(), launch.argvPointers.data(), launch.envPointers.data());
  const char* message = "granaryctl: exec failed\n";
  (void)!::write(STDERR_FILENO, message, std::strlen(message));
  ::_exit(127);
}

}  // namespace

std::string findProgram(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos)
    return ::access(program.c_str(), X_OK) == 0 ? program : "";
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

Result<std::string> WorkerGang::programOf(const LocalWorker& worker) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  for (const auto& [name, value] : worker.env)
    if (name == "PATH") path = value;
  std::string program = findProgram(worker.argv.front(), path);
  if (program.empty())
    return invalidArgument("spec.template.spec.containers[0].command[0]: \"" + worker.argv.front() +
                           "\" is not an executable on this machine's PATH; install it, put its "
                           "folder on PATH, or name it by its path");
  return program;
}

Result<std::unique_ptr<WorkerGang>> WorkerGang::start(const std::vector<LocalWorker>& workers,
                                                      LineHandler onLine) {
  std::unique_ptr<WorkerGang> gang(new WorkerGang());
  for (const auto& worker : workers) {
    GRANARY_ASSIGN_OR_RETURN(std::string program, programOf(worker));
    gang->programs_.push_back(std::move(program));
  }
  gang->workers_ = workers;
  gang->onLine_ = std::move(onLine);
  gang->pids_.assign(workers.size(), 0);
  gang->reaped_.assign(workers.size(), true);
  gang->reader_ = std::jthread([g = gang.get()](std::stop_token stop) { g->readOutput(stop); });
  for (size_t rank = 0; rank < workers.size(); ++rank)
    GRANARY_RETURN_IF_ERROR(gang->launch(static_cast<int>(rank), gang->programs_[rank]));
  return gang;  // on an error above, the destructor stops what started
}

Status WorkerGang::replace(int rank) {
  if (stopped_ || !reaped_.at(rank))
    return failedPrecondition(workers_[rank].name + " is still running or the gang is stopped");
  ::kill(-pids_[rank], SIGKILL);  // whatever the lost worker started and left behind
  return launch(rank, programs_[rank]);
}

Status WorkerGang::launch(int rank, const std::string& program) {
  const LocalWorker& worker = workers_[rank];
  Launch launch{.program = program,
                .argv = worker.argv,
                .env = environmentFor(worker),
                .workingDirectory = worker.workingDirectory.string()};
  int pipe[2];
  if (::pipe2(pipe, O_CLOEXEC) != 0) return unavailable(std::string("pipe: ") + strerror(errno));
  const int devNull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  launch.prepare();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) execChild(launch, pipe[1], devNull, parent);
  ::close(pipe[1]);
  ::close(devNull);
  if (pid < 0) {
    ::close(pipe[0]);
    return unavailable(std::string("fork: ") + strerror(errno));
  }
  ::setpgid(pid, pid);  // also here, so that the group exists before anyone signals it
  pids_[rank] = pid;
  reaped_[rank] = false;
  MutexLock lock(outputsMutex_);
  newOutputs_.push_back({rank, pipe[0]});
  return Status::ok();
}

WorkerGang::~WorkerGang() { stop(5s); }

std::vector<WorkerExit> WorkerGang::reap() {
  std::vector<WorkerExit> ended;
  for (size_t rank = 0; rank < pids_.size(); ++rank) {
    int status = 0;
    if (reaped_[rank] || ::waitpid(pids_[rank], &status, WNOHANG) != pids_[rank]) continue;
    reaped_[rank] = true;
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    ended.push_back({static_cast<int>(rank), code});
  }
  return ended;
}

int WorkerGang::running() const {
  return static_cast<int>(std::count(reaped_.begin(), reaped_.end(), false));
}

void WorkerGang::stop(std::chrono::milliseconds grace) {
  if (stopped_) return;  // the groups' ids may belong to others by now
  stopped_ = true;
  for (size_t rank = 0; rank < pids_.size(); ++rank)
    if (!reaped_[rank]) ::kill(-pids_[rank], SIGTERM);  // a slot never started counts as reaped
  Clock& clock = realClock();
  const auto deadline = clock.monoNow() + grace;
  while (running() > 0 && clock.monoNow() < deadline) {
    reap();
    if (running() > 0) clock.sleepFor(20ms, {});
  }
  // What is left, and anything a worker started and left behind in its group.
  for (const pid_t pid : pids_)
    if (pid > 0) ::kill(-pid, SIGKILL);
  for (size_t rank = 0; rank < pids_.size(); ++rank)
    if (!reaped_[rank]) {
      ::waitpid(pids_[rank], nullptr, 0);
      reaped_[rank] = true;
    }
  if (reader_.joinable()) {
    reader_.request_stop();
    reader_.join();
  }
}

// Reads every worker's output until each pipe closes (or stop is requested after the workers
// are gone), handing over complete lines; a last line without a newline is handed over too.
// A replaced worker's pipe joins the others when the gang hands it over.
void WorkerGang::readOutput(std::stop_token stop) {
  std::vector<std::string> partial;
  std::vector<int> ranks;
  std::vector<pollfd> fds;
  const auto takeNew = [&] {
    MutexLock lock(outputsMutex_);
    for (const Output& o : newOutputs_) {
      fds.push_back({.fd = o.fd, .events = POLLIN, .revents = 0});
      ranks.push_back(o.rank);
      partial.emplace_back();
    }
    newOutputs_.clear();
  };
  const auto open = [&] {
    return std::any_of(fds.begin(), fds.end(), [](const pollfd& p) { return p.fd >= 0; });
  };
  while (true) {
    takeNew();
    if (!open()) {  // every pipe closed: until a replaced worker's comes, or the end
      if (stop.stop_requested()) break;
      realClock().sleepFor(100ms, stop);
      continue;
    }
    if (::poll(fds.data(), fds.size(), 100) <= 0) {
      if (stop.stop_requested()) break;  // the workers are gone; what they started may linger
      continue;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        if (!partial[i].empty()) onLine_(ranks[i], partial[i]);
        partial[i].clear();
        continue;
      }
      partial[i].append(buffer, n);
      for (size_t nl; (nl = partial[i].find('\n')) != std::string::npos;) {
        onLine_(ranks[i], partial[i].substr(0, nl));
        partial[i].erase(0, nl + 1);
      }
    }
  }
  for (const auto& p : fds)
    if (p.fd >= 0) ::close(p.fd);
  MutexLock lock(outputsMutex_);
  for (const Output& o : newOutputs_) ::close(o.fd);
  newOutputs_.clear();
}

}  // namespace granary::cli
