// The workers of a local run as one gang of processes: started together, each the leader of
// its own process group (so whatever a worker starts is stopped with it), their output read
// line by line, stopped together. A worker gets SIGKILL when granaryctl dies (PR_SET_PDEATHSIG),
// so even a killed granaryctl leaves no worker behind.
//
// A worker of an elastic job can be started again on its own (replace()), into the same gang.
//
// Thread-safety: one thread calls the methods; `onLine` is called on the gang's output thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/local_job.h"
#include "common/result.h"
#include "common/thread_annotations.h"

namespace granary::cli {

struct WorkerExit {
  int rank = 0;
  int code = 0;  // the exit status, or 128 + the signal that ended it
};

class WorkerGang {
 public:
  using LineHandler = std::function<void(int rank, const std::string& line)>;

  // Finds every worker's program first (on PATH from its environment, or granaryctl's), then
  // starts them all. InvalidArgument naming command[0] when a program is missing or cannot be
  // run; nothing is started then.
  static Result<std::unique_ptr<WorkerGang>> start(const std::vector<LocalWorker>& workers,
                                                   LineHandler onLine);
  // The program `worker` runs, found as start() finds it; InvalidArgument as start() says.
  static Result<std::string> programOf(const LocalWorker& worker);
  ~WorkerGang();  // stop(5 s) if anything still runs
  WorkerGang(const WorkerGang&) = delete;
  WorkerGang& operator=(const WorkerGang&) = delete;

  // Starts `rank`'s worker again, as start() did, once its last process is reaped.
  // FailedPrecondition while it runs; Unavailable when fork or pipe fails.
  Status replace(int rank);

  // The workers that ended since the last call, without waiting.
  std::vector<WorkerExit> reap();
  int running() const;  // workers not yet reaped
  // Process group ids by rank (each worker's pid), to tell whose reads are whose.
  const std::vector<pid_t>& groups() const { return pids_; }
  // SIGTERM to every worker's process group, SIGKILL to what is left after `grace`; returns
  // once every worker is reaped and its output read.
  void stop(std::chrono::milliseconds grace);

 private:
  struct Output {
    int rank;
    int fd;  // the read end of the worker's stdout+stderr pipe
  };

  WorkerGang() = default;
  Status launch(int rank, const std::string& program);
  void readOutput(std::stop_token stop);

  std::vector<LocalWorker> workers_;
  std::vector<std::string> programs_;
  std::vector<pid_t> pids_;
  std::vector<bool> reaped_;
  bool stopped_ = false;
  Mutex outputsMutex_;
  std::vector<Output> newOutputs_ GRANARY_GUARDED_BY(outputsMutex_);  // for the reader to take
  LineHandler onLine_;
  std::jthread reader_;
};

// Where `program` would be run from: itself when it holds a '/', else the first executable
// file of that name on `path` (a PATH value). Empty when there is none.
std::string findProgram(const std::string& program, const std::string& path);

}  // namespace granary::cli
