// Local mode's plan: a TrainingJob and its Datasets, decoded from manifests exactly as on a
// cluster, turned into what `granaryctl run` starts on this machine: each dataset's mount point
// under the run directory, and each worker's command and environment as the operator would give
// its pod. Pure: nothing is started, mounted or read here.
//
// What a worker gets, in order of precedence:
//   - the template's first container: command + args, env (value only), workingDir;
//   - the torchrun environment of api::workerEnvironment with MASTER_ADDR=127.0.0.1 (an elastic
//     job: the rendezvous store at 127.0.0.1:rendezvousPort, id "<namespace>-<job>"), LOCAL_RANK
//     (every worker is on this machine), GRANARY_RUN_DIR, and the GPUs: CUDA_VISIBLE_DEVICES,
//     gpusPerWorker of them each in NVML's (PCI bus) order, CUDA_DEVICE_ORDER=PCI_BUS_ID;
//     empty when gpusPerWorker is 0, as a pod without GPUs sees none;
//   - $(VAR) references in command, args and env values expanded as Kubernetes does;
//   - a mount path of the job (say /data/coco) in an argument, an env value or the workingDir,
//     as a whole path or the start of one (/data/coco/train), after the start, a space, a
//     quote, '=', ':' or ',', mapped to its local path (RUN_DIR/data/coco/train); so
//     `--data=/data/coco` and `sh -c "ls /data/coco"` both reach the dataset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/api/manifest.h"
#include "common/result.h"

namespace granary::cli {

struct LocalRunOptions {
  std::filesystem::path runDirectory;  // absolute
  std::string jobName;                 // which TrainingJob; "" when the manifests hold one
  int gpuCount = 0;                    // GPUs on this machine
  std::string noGpuReason;             // why there are none ("" when there are)
  int32_t masterPort = 0;              // a free port on 127.0.0.1 for rank 0
  int32_t rendezvousPort = 0;          // another, for an elastic job's rendezvous store
  int32_t rendezvousNoticePort = 0;    // and another, for the notices of its agents gone
  std::string rendezvousToken;         // the store takes notices only with it (random per run)
};

struct LocalDataset {
  api::Dataset dataset;
  std::string mountPath;            // as the job names it: /data/coco
  std::filesystem::path localPath;  // where it is mounted: RUN_DIR/data/coco
  std::string accessOrderFile;      // the job's hint for it (spec.datasets[].accessOrderFile)
};

// The job's checkpoints on this machine: the directory the workers write at
// RUN_DIR/<mountPath>, a link to the tree kept under the cache directory (so that a later run of
// the job, or of another job with the same uri, finds it), drained to `source`.
struct LocalCheckpoints {
  api::CheckpointVolume volume;     // as the job names it: mountPath /ckpt
  std::filesystem::path localPath;  // what the workers are given: RUN_DIR/ckpt
};

// A path of the job mapped to this machine (a dataset's or the checkpoints').
struct PathMapping {
  std::string mountPath;
  std::filesystem::path localPath;
};

struct LocalWorker {
  int rank = 0;
  std::string name;               // <job>-worker-<rank>, as the pod is named on a cluster
  std::vector<std::string> argv;  // argv[0] as the template names it (found on PATH at start)
  std::vector<std::pair<std::string, std::string>> env;  // on top of granaryctl's environment
  std::filesystem::path workingDirectory;                // "" to stay where granaryctl runs
  std::vector<int> gpus;                                 // NVML indices
};

struct LocalPlan {
  api::TrainingJob job;
  std::filesystem::path runDirectory;
  std::vector<LocalDataset> datasets;
  std::optional<LocalCheckpoints> checkpoints;
  std::vector<PathMapping> paths;  // every mount path of the job, longest first
  // spec.workers, then for an elastic job the ranks up to maxWorkers that the machine's GPUs
  // leave room for (all of them when gpusPerWorker is 0), started with the others.
  std::vector<LocalWorker> workers;
  // An elastic job's rendezvous store: a process of its own beside the workers (so that no
  // worker's loss takes it down), api::rendezvousStoreCommand on 127.0.0.1:rendezvousPort and
  // rendezvousNoticePort, with rank 0's environment (python3 found on its PATH) and the run's
  // notice token (api::kRendezvousTokenEnv). Unset for a fixed gang.
  std::optional<LocalWorker> rendezvous;
  std::string rendezvousId;       // "<namespace>-<job>"
  std::string rendezvousNotices;  // 127.0.0.1:rendezvousNoticePort
  std::string rendezvousToken;    // LocalRunOptions::rendezvousToken, sent with each notice
};

// InvalidArgument naming the field and the fix: no or several TrainingJobs (without a job
// name), a dataset the manifests do not define, a mount path with "..", a container without a
// command, an env var from a Secret or a field reference, more GPUs than the machine has.
Result<LocalPlan> planLocalRun(const std::vector<api::ManifestDocument>& documents,
                               const LocalRunOptions& options);

// Kubernetes' expansion of command, args and env values: $(NAME) becomes NAME's value when
// `lookup` knows it and stays as written otherwise; $$ is a literal $.
std::string expandReferences(
    std::string_view text,
    const std::function<std::optional<std::string>(std::string_view name)>& lookup);

// `text` with each mount path in it (see above) replaced by its local path.
std::string mapMountPaths(const std::string& text, const std::vector<PathMapping>& paths);

}  // namespace granary::cli
