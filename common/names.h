// The names that granary's binaries, its chart and its users must agree on: the API group and
// version, labels, annotations, the finalizer, the CSI driver and its volume attributes, the
// components' names and their default ports. Each is defined here once; a binary, a test or a
// manifest generator that needs one includes this header instead of spelling it again.
#pragma once

#include <string>

namespace granary::names {

// The API of Dataset and TrainingJob (crds/).
inline constexpr const char* kApiGroup = "granary.io";
inline constexpr const char* kApiVersion = "v1alpha1";
inline constexpr const char* kGroupVersion = "granary.io/v1alpha1";  // an object's apiVersion
inline constexpr const char* kDatasetKind = "Dataset";
inline constexpr const char* kTrainingJobKind = "TrainingJob";

// Labels the operator puts on a TrainingJob's worker pods and Service.
inline constexpr const char* kJobNameLabel = "granary.io/job-name";  // the TrainingJob's name
inline constexpr const char* kRankLabel = "granary.io/rank";         // the worker's rank
// An elastic job's rendezvous store pod: the TrainingJob's name. Not kJobNameLabel: the store is
// not one of the gang's workers.
inline constexpr const char* kRendezvousLabel = "granary.io/rendezvous-for";
// An elastic job's worker beyond spec.workers (up to maxWorkers): "true". granary-scheduler
// places it on its own when it fits, not as part of the gang.
inline constexpr const char* kSurplusLabel = "granary.io/surplus";
// The gang attempt a pod belongs to (the job's status.restarts when the pod was created).
inline constexpr const char* kAttemptLabel = "granary.io/attempt";
// "false" on the workers of a job with warmPolicy None: their reads do not ask for warming.
inline constexpr const char* kWarmLabel = "granary.io/warm";

// On a worker pod: the access-order file its job names for each dataset, a JSON object from
// dataset name to spec.datasets[].accessOrderFile, set only when one names a file. The Dataset
// controller reads it back (operator/core/readers.h) and passes it on in SetWarmPlan.
inline constexpr const char* kAccessOrderFilesAnnotation = "granary.io/access-order-files";

// On a pod whose view of a Dataset ended (its cache node's pod was replaced without handing over,
// or killed hard): which Dataset, on which node, since when. Set by the Dataset controller, which
// then names the pod in Events once; a TrainingJob worker with it restarts its gang.
inline constexpr const char* kMountLostAnnotation = "granary.io/dataset-mount-lost";

// On a Dataset: any new value asks for a refresh (its origin listed again, a new version made
// when anything changed). status.refresh.observedRequest says which value was acted on.
inline constexpr const char* kRefreshRequestedAnnotation = "granary.io/refresh-requested";

// On a granary-cache-node pod: the cache space it offers, a quantity such as "800Gi".
inline constexpr const char* kCacheCapacityAnnotation = "granary.io/cache-capacity";

// On a Dataset while its caches may hold data: removed once every node purged it.
inline constexpr const char* kDatasetFinalizer = "granary.io/cache-purge";

// The CSI driver of dataset volumes, and the volume attributes a pod's inline volume sets.
inline constexpr const char* kCsiDriver = "csi.granary.io";
inline constexpr const char* kCsiDatasetAttribute = "dataset";      // the Dataset's name
inline constexpr const char* kCsiNamespaceAttribute = "namespace";  // optional: must be the pod's
// Optional: the Dataset version to mount (its status.version); the newest on the node without it.
inline constexpr const char* kCsiVersionAttribute = "version";
// Optional: "true" publishes the volume only once this node's share of the dataset is warm
// (settled: nothing left to warm), so that the pod's containers start on warm data; a TrainingJob
// with warmPolicy BeforeStart sets it on its workers.
inline constexpr const char* kCsiWarmFirstAttribute = "warmFirst";
// A job's checkpoint volume (spec.checkpoints) instead of a Dataset: the uri it drains to and
// restores from, the s3 endpoint and region when set, the uploads' bandwidthLimit in bytes per
// second, and each origin option as "option.<name>". Its credentials come as the volume's
// nodePublishSecretRef, which the kubelet reads and hands to the node plugin.
inline constexpr const char* kCsiCheckpointsAttribute = "checkpoints";
inline constexpr const char* kCsiEndpointAttribute = "endpoint";
inline constexpr const char* kCsiRegionAttribute = "region";
inline constexpr const char* kCsiBandwidthLimitAttribute = "bandwidthLimit";
inline constexpr const char* kCsiOptionAttributePrefix = "option.";
// The nodes that held the job's checkpoints when the pod was made, which a restore reads before
// the origin: "node=host:port" each, comma-separated.
inline constexpr const char* kCsiCheckpointPeersAttribute = "checkpointPeers";

// The components, as they name themselves (Leases, Events, the scheduler's schedulerName).
inline constexpr const char* kOperator = "granary-operator";
inline constexpr const char* kScheduler = "granary-scheduler";
inline constexpr const char* kCacheNode = "granary-cache-node";
// How the operator finds the cache-node pods unless told otherwise.
inline constexpr const char* kCacheNodeSelector = "app.kubernetes.io/name=granary-cache-node";
// The container port of a cache-node pod that serves its gRPC API.
inline constexpr const char* kCacheNodeGrpcPortName = "grpc";

// Default ports.
inline constexpr int kCacheNodeGrpcPort = 7400;      // CacheNode and Peer gRPC APIs
inline constexpr int kCacheNodeTransferPort = 7401;  // the peer data plane (chunk bytes)
inline constexpr int kCacheNodeMetricsPort = 9400;   // the cache node's /metrics, /healthz, /readyz
inline constexpr int kOperatorMetricsPort = 8080;    // the operator's /metrics, /healthz, /readyz
inline constexpr int kSchedulerMetricsPort = 8080;   // the scheduler's /metrics, /healthz, /readyz
inline constexpr int kSchedulerExtenderPort = 8888;  // the kube-scheduler extender's HTTP API

// "0.0.0.0:<port>": every interface, as the binaries listen by default.
inline std::string anyAddress(int port) { return "0.0.0.0:" + std::to_string(port); }

}  // namespace granary::names
