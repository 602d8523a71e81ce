// granary-cache-node's options file (YAML). Every field has a default that works on one
// machine; in a cluster the DaemonSet sets nodeName from the downward API and mounts the token.
//
//   nodeName: gpu-1                  # default: $NODE_NAME, else the host name
//   listen: 0.0.0.0:7400             # CacheNode and Peer gRPC APIs
//   transferListen: 0.0.0.0:7401     # the peer data plane (chunks between cache nodes); ""
//                                    # (or TLS on) sends them over the Peer gRPC API instead
//   transferConnectionsPerPeer: 4    # connections this node opens to each peer's data plane
//   transferStallMs: 30000           # a peer that stops sending (or reading) a chunk this long
//                                    # loses it: the chunk comes from the next owner or origin
//   heldChunkMemory: 256Mi           # other nodes' chunks held after a read fetched them, for
//                                    # the reads of the same chunk that follow; 0 holds none
//   metricsAddress: 0.0.0.0:9400     # /metrics, /healthz, /readyz; "" disables
//   tokenFile: /etc/granary/token    # shared bearer token; default: <stateDirectory>/token,
//                                    # created with a random token if missing
//   tls: {certificateFile: ..., keyFile: ..., caFile: ...}   # optional
//   stateDirectory: /var/lib/granary # manifests and the chunk index; handover.sock, where a
//                                    # process replacing this one (a new pod) asks for the node
//   cacheDirectories:                # default: <stateDirectory>/cache with a 10Gi quota
//     - {path: /mnt/nvme0/granary, quota: 1500Gi}
//   chunkSize: 16Mi
//   warmConcurrency: 8
//   listingConcurrency: 8            # listers per dataset side by side (S3, file://: parts of
//                                    # the origin's key order)
//   bandwidthLimit: 0                # origin bytes per second for the whole node; 0 unlimited
//   verifyChecksumsAtStart: false    # true: re-read every chunk (chunks written after the last
//                                    # flush always are)
//   fileOriginRoots: []              # directories file:// sources may read, e.g.
//                                    # [/srv/datasets/{namespace}] (each namespace its own) or
//                                    # [shared:/srv/corpus] (every namespace); none: file://
//                                    # sources are refused
//   checkpointOriginRoots: []        # directories file:// checkpoint uris may write (and
//                                    # remove from, as jobs rotate), in the same two forms, e.g.
//                                    # [/srv/checkpoints/{namespace}]; none: refused
//   mountRoot: ""                    # dataset mounts; default <stateDirectory>/mounts
//   csiSocket: ""                    # e.g. /csi/csi.sock: serve the CSI node plugin there
//   mountKeeper: true                # hand dataset mounts to the mount keeper so that they and
//                                    # their readers outlive a restart; where the kernel cannot
//                                    # (checked at start: /dev/fuse, SCM_RIGHTS, Linux 6.9+'s
//                                    # FUSE_NOTIFY_RESEND) the node runs without and says why
//   mountKeeperSocket: ""            # where the keeper (granary-cache-node --serve-mount-keeper
//                                    # SOCKET --token-file FILE) listens; default
//                                    # <stateDirectory>/mount-keeper.sock. Node-scoped, so that
//                                    # a new pod's keeper takes the mounts from the old one's
//   mountKeeperWaitSeconds: 30       # how long a keeper not listening at start is waited for
//                                    # (in a pod its container may start after this one's)
//   sharedMounts: []                 # directories whose mounts must propagate (shared mounts),
//                                    # checked at start: the chart lists the state directory and
//                                    # the kubelet's pods directory. One on a private mount leaves
//                                    # the node not ready, with the fix in the log and /readyz
//   passthrough: true                # where the kernel has FUSE passthrough (Linux 6.9+), the
//                                    # kernel reads files cached whole in one chunk from the
//                                    # chunk's file, past the node ...
//   passthroughMinAverageFileSize: 4Mi  # ... in datasets whose files average this or more
//                                    # (smaller ones read faster through the page cache)
//   logLevel: info
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/names.h"
#include "common/quantity.h"
#include "engine/engine.h"

namespace granary::cache {

struct CacheDirectoryOptions {
  std::string path;
  ByteSize quota;
};

struct TlsOptions {
  std::string certificateFile;
  std::string keyFile;
  std::string caFile;  // to verify peers; "" uses plain connections to peers

  // Whether this node serves or reaches its peers over TLS.
  bool enabled() const { return !certificateFile.empty() || !caFile.empty(); }
};

struct NodeOptions {
  std::string nodeName;
  std::string listen = names::anyAddress(names::kCacheNodeGrpcPort);
  // The peer data plane (cache-node/transfer/): "" (or TLS) leaves chunks to the Peer gRPC API.
  std::string transferListen = names::anyAddress(names::kCacheNodeTransferPort);
  // Connections to each peer's data plane: more fill a faster NIC, each costs a thread there.
  int32_t transferConnectionsPerPeer = 4;
  int32_t transferStallMs = 30'000;  // how long a transfer may stand still before it fails
  // Memory for other nodes' chunks after a read (EngineOptions::heldChunkBytes).
  ByteSize heldChunkMemory{256 << 20};
  std::string metricsAddress = names::anyAddress(names::kCacheNodeMetricsPort);
  std::string tokenFile;
  TlsOptions tls;
  std::string stateDirectory = "/var/lib/granary";
  std::vector<CacheDirectoryOptions> cacheDirectories;
  ByteSize chunkSize{16 << 20};
  int32_t warmConcurrency = 8;
  int32_t listingConcurrency = 8;
  ByteSize bandwidthLimit{0};
  bool verifyChecksumsAtStart = false;
  // The directories file:// sources may read (within, after symlinks and ".."), each a root of
  // namespaces ("/srv/datasets/{namespace}": a Dataset only its namespace's directory) or a
  // shared root ("shared:/srv/corpus": every namespace's Datasets all of it), as
  // common/origin_roots.h says; a bare directory is refused at start. Empty refuses every
  // file:// source.
  std::vector<std::string> fileOriginRoots;
  // The directories file:// checkpoint uris (spec.checkpoints) may write, in the same two forms,
  // apart from fileOriginRoots, which stay read-only; empty refuses file:// checkpoints.
  std::vector<std::string> checkpointOriginRoots;
  std::string mountRoot;  // dataset mounts; default <stateDirectory>/mounts
  std::string csiSocket;  // the CSI node plugin's unix socket; "" serves no CSI
  // Mount recovery: dataset mounts handed to the mount keeper outlive a restart of the node
  // (readers wait instead of failing). On by default; off costs nothing but that.
  bool mountKeeper = true;
  std::string mountKeeperSocket;  // the keeper's unix socket; default <state>/mount-keeper.sock
  int32_t mountKeeperWaitSeconds = 30;  // how long a keeper absent at start is waited for
  // Directories on which mounts this node makes must reach the host and other containers
  // (mountPropagation: Bidirectional needs the host's mount to be shared); empty checks none.
  std::vector<std::string> sharedMounts;
  // Where the kernel has FUSE passthrough (Linux 6.9+), files cached whole in one chunk of a
  // dataset whose files average passthroughMinAverageFileSize or more are read by the kernel
  // from the chunk's file, not copied through the node.
  bool passthrough = true;
  ByteSize passthroughMinAverageFileSize{4 << 20};
  std::string logLevel = "info";
  bool gpuTelemetry = true;                       // sample the node's GPUs through NVML
  int32_t gpuSampleIntervalMs = 1000;             // how often
  std::string nvmlLibrary = "libnvidia-ml.so.1";  // NVML: a file name (searched) or a path
  // The kubelet's PodResources API, to tell which pod each GPU is allocated to; "" for none.
  std::string podResourcesSocket;
};

Status decodeValue(const config::Node& node, CacheDirectoryOptions& out);
Status decodeValue(const config::Node& node, TlsOptions& out);
Status decodeValue(const config::Node& node, NodeOptions& out);

// Fills what the file left unset: nodeName from $NODE_NAME or the host name, the token file
// and a cache directory under the state directory.
void applyDefaults(NodeOptions& options);

EngineOptions engineOptionsOf(const NodeOptions& options);

// The origin settings of a list of roots the options checked (fileOriginRoots or
// checkpointOriginRoots, named by `option`): "shared:" roots shared, the others of namespaces.
OriginSettings originSettingsOf(const std::vector<std::string>& roots, const std::string& option);

}  // namespace granary::cache
