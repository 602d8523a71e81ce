// Local mode's engine room: a LocalPlan run to its end on this machine. The cache engine runs
// in process; each dataset is mounted read-only through the same FUSE code as on a node, at its
// local path; the workers run as a gang (cli/worker_gang.h) with the job's warm, restart and
// deadline policies:
//   - warmPolicy Parallel starts the workers at once; BeforeStart once every dataset is Ready;
//     None leaves a Dataset with warm: OnJob unwarmed (reads still fill the cache);
//   - a dataset's accessOrderFile (the job's spec.datasets[]) is the engine's warm order;
//   - a worker that fails stops the gang, which starts again while runPolicy allows
//     (restartPolicy OnFailure: any failure; ExitCode: exit codes 128 and up, the killed;
//     Never: none) and backoffLimit restarts are left;
//   - activeDeadlineSeconds, counted from the start, stops everything (exit code 124).
// Reads are told apart by process group: whatever a worker starts reads for that worker.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stop_token>
#include <string>

#include "cli/local_job.h"
#include "engine/gpu/gpu_sampler.h"

namespace granary::cli {

struct LocalRunSettings {
  std::filesystem::path cacheDirectory;  // the engine's state and chunks
  int64_t cacheBytes = 0;                // the chunks' quota
  bool plain = false;                    // timestamped lines even on a terminal
  // List each dataset's origin again before the job starts; a change makes a new version
  // (engine/local_versions.h), which the job reads.
  bool refresh = false;
};

// Returns the exit code: 0 when every worker exits 0; the failing worker's code; 124 past the
// deadline; 130 when `stop` is requested (Ctrl-C, SIGTERM); 1 when the run cannot start.
// Nothing is left behind: no worker process, no mount. `gpus` may be null.
int runLocally(const LocalPlan& plan, const LocalRunSettings& settings,
               const cache::GpuSampler* gpus, std::stop_token stop);

}  // namespace granary::cli
