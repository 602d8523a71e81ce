// TrainingJob (granary.io/v1alpha1): workers that read Datasets. Mirrors
// crds/granary.io_trainingjobs.yaml; the pod template is kept as a document for the operator.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/api/dataset.h"
#include "common/api/object_meta.h"
#include "common/config.h"
#include "common/names.h"

namespace granary::api {

struct DatasetMount {
  std::string name;       // a Dataset in the job's namespace
  std::string mountPath;  // absolute path inside the workers
  // A file of the dataset listing its paths in the order the workers read them, one per line
  // ("" for none): relative to the dataset's root, without "..". The cache nodes warm in that
  // order (SetWarmPlanRequest.access_order_file).
  std::string accessOrderFile;
};

// The job's checkpoints (spec.checkpoints): a read-write directory at `mountPath` in every
// worker, on the node's disk, drained in the background to `source` (s3:// or file://, with
// credentials as a Dataset's source) and restored from it when the workers start again.
struct CheckpointVolume {
  Source source;
  std::string mountPath;  // absolute, apart from every dataset's mountPath
  // Uploads' share of the origin per node, in bytes/s, so that dataset reads are not starved;
  // unset: unlimited.
  std::optional<ByteSize> bandwidthLimit;
  // Other nodes of the job each closed file is copied to before it reaches the origin (0: none).
  int32_t copies = 1;
};

// spec.elastic: the job runs on any number of workers from minWorkers to maxWorkers (with
// 1 <= minWorkers <= workers <= maxWorkers). The workers' torchrun agents meet at a rendezvous
// that no worker hosts, so a lost worker costs the others a re-rendezvous, not a restart of the
// gang, while at least minWorkers remain.
struct ElasticPolicy {
  int32_t minWorkers = 1;
  int32_t maxWorkers = 1;  // unset: workers
};

enum class WarmStart { kParallel, kBeforeStart, kNone };
enum class Locality { kPreferred, kRequired };
enum class CleanPodPolicy { kAll, kRunning, kNone };
enum class RestartPolicy { kOnFailure, kExitCode, kNever };

// Workers are always placed as a gang (all or none) and restarted as one: torchrun's rendezvous
// needs every rank, and granary-scheduler places a job's workers together.
struct Scheduling {
  Locality locality = Locality::kPreferred;
  std::string schedulerName = names::kScheduler;
  std::string priorityClassName;
};

struct RunPolicy {
  int32_t backoffLimit = 3;  // gang restarts before the job fails
  std::optional<int64_t> activeDeadlineSeconds;
  int64_t startDeadlineSeconds = 600;  // workers Pending or failing to pull this long fail the job
  std::optional<int64_t> ttlSecondsAfterFinished;
  CleanPodPolicy cleanPodPolicy = CleanPodPolicy::kRunning;
  RestartPolicy restartPolicy = RestartPolicy::kOnFailure;
};

struct TrainingJobSpec {
  std::vector<DatasetMount> datasets;
  std::optional<CheckpointVolume> checkpoints;
  int32_t workers = 1;  // 1..4096; the number wanted when elastic
  std::optional<ElasticPolicy> elastic;
  int32_t gpusPerWorker = 1;  // 0..64
  int32_t masterPort = 29500;
  config::Node template_;  // a PodTemplateSpec; must have at least one container
  WarmStart warmPolicy = WarmStart::kParallel;
  Scheduling scheduling;
  RunPolicy runPolicy;
  bool suspend = false;
};

struct TrainingJob {
  ObjectMeta metadata;
  TrainingJobSpec spec;
};

Status decodeValue(const config::Node& node, DatasetMount& out);
Status decodeValue(const config::Node& node, CheckpointVolume& out);
Status decodeValue(const config::Node& node, ElasticPolicy& out);
Status decodeValue(const config::Node& node, WarmStart& out);
Status decodeValue(const config::Node& node, Locality& out);
Status decodeValue(const config::Node& node, CleanPodPolicy& out);
Status decodeValue(const config::Node& node, RestartPolicy& out);
Status decodeValue(const config::Node& node, Scheduling& out);
Status decodeValue(const config::Node& node, RunPolicy& out);
Status decodeValue(const config::Node& node, TrainingJobSpec& out);

std::string_view warmStartName(WarmStart policy);

// Whether `path` names a file inside a dataset: not empty, relative, no ".." component, at most
// 1024 characters.
bool isPathInsideDataset(const std::string& path);

// The name of rank `rank`'s worker: "<job>-worker-<rank>" (a pod on a cluster, a process locally).
std::string workerName(const std::string& job, int rank);

// Where a job's workers meet: rank 0's address and port for a fixed gang; for an elastic job
// the rendezvous store's host:port and the rendezvous id (the job's uid on a cluster).
struct Rendezvous {
  std::string masterAddress;
  int32_t masterPort = 0;
  std::string endpoint;
  std::string id;
};

// The torchrun environment every worker gets, on a cluster and locally alike, and
// PYTHONUNBUFFERED. A fixed gang: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and the PET_*
// variables of a static rendezvous. An elastic job: the PET_* variables of torchrun's c10d
// rendezvous (PET_NNODES=min:max, PET_RDZV_ENDPOINT, PET_RDZV_ID, PET_RDZV_CONF with
// is_host=false, since the store is not a worker's, and a 5 s last call; PET_MAX_RESTARTS =
// runPolicy.backoffLimit; PET_MONITOR_INTERVAL=1, so that an agent sees its worker fail within a
// second), without ranks: the rendezvous assigns them. Variables the
// template's container sets itself are left to it (the caller skips them).
std::vector<std::pair<std::string, std::string>> workerEnvironment(const TrainingJobSpec& spec,
                                                                   int rank,
                                                                   const Rendezvous& meet);

// The ports of an elastic job's rendezvous store on a cluster: torch's store, and the notices of
// agents gone.
inline constexpr int32_t kRendezvousPort = 29400;
inline constexpr int32_t kRendezvousNoticePort = 29401;

// The command that hosts an elastic job's rendezvous store, listening on `port` of every
// interface: python3 with the job's own torch, so that the store speaks its workers' protocol.
// On `noticePort` it takes notices of agents gone (rendezvousNotice, by HTTP POST /gone): each
// agent named there whose last heartbeat is older than the notice is let go at once, so that the
// others meet again without waiting out torch's keep-alive (3 x 5 s); for a minute, since the
// others may meet again only later. A notice is taken only with "Authorization: Bearer <token>",
// the token in the store's environment variable kRendezvousTokenEnv (none there: every notice is
// refused); any other is answered 403, changes nothing and is counted. GET /metrics on the same
// port: granary_rendezvous_notices_total and granary_rendezvous_notices_refused_total{reason}
// (token: without the job's token; unreadable: with it, but not a notice). torch's own store on
// `port` still takes anyone's word: a NetworkPolicy closes it (docs/operator.md).
std::vector<std::string> rendezvousStoreCommand(int32_t port, int32_t noticePort);
// The store's environment variable holding its job's notice token (rendezvous_notice.h).
inline constexpr const char* kRendezvousTokenEnv = "GRANARY_RENDEZVOUS_TOKEN";

// An agent gone from a rendezvous: on a cluster its pod's hostname (the worker's name), the
// first label of the agent's address; locally its process id. Either or both.
struct GoneAgent {
  std::string host;
  int64_t pid = 0;
};

// The body of a notice to the store: "rendezvous <id>", then a line per agent: "host <name>",
// "pid <n>" or "host <name> pid <n>".
std::string rendezvousNotice(const std::string& rendezvousId, const std::vector<GoneAgent>& gone);

}  // namespace granary::api
