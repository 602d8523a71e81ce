// What a CSI NodePublishVolume asks for, checked: which Dataset (or which job's checkpoints), for
// which pod, where. Pure: the gRPC adapter (csi_server) hands it the request's fields and maps the
// Status to gRPC codes.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "engine/origin/make_origin.h"

namespace granary::cache {

struct Publication {
  std::string volumeId;
  std::filesystem::path targetPath;
  std::string datasetNamespace;  // always the pod's namespace
  std::string datasetName;
  // The version of the Dataset to mount (volumeAttributes.version: a TrainingJob keeps the one
  // its workers first read); 0 for the newest on the node.
  int64_t version = 0;
  // volumeAttributes.warmFirst: published only once this node's share of the dataset is warm.
  bool warmFirst = false;
  std::string podNamespace, podName, podUid;
};

struct PublishFields {
  std::string volumeId;
  std::string targetPath;
  bool hasCapability = false;
  bool blockAccess = false;
  std::map<std::string, std::string> volumeContext;  // volumeAttributes plus kubelet's pod keys
  // The Secret of the volume's nodePublishSecretRef, which the kubelet reads and hands over.
  std::map<std::string, std::string> secrets;
};

// InvalidArgument naming the field and the fix for a missing volume id or target, a block
// volume, a volume that is not an ephemeral inline one, a missing `dataset` attribute or pod
// information (the CSIDriver needs podInfoOnMount), or a tab or newline in a field the record
// keeps; PermissionDenied when the `namespace` attribute names another namespace than the pod's.
Result<Publication> parsePublication(const PublishFields& fields);

// A pod's checkpoint volume (volumeAttributes.checkpoints, set by the operator from a
// TrainingJob's spec.checkpoints): the job's tree on this node, bound read-write at the target,
// restored from and drained to the uri.
struct CheckpointPublication {
  std::string volumeId;
  std::filesystem::path targetPath;
  std::string podNamespace, podName, podUid;
  // The uri, endpoint, region and options, with the credentials of the Secret (keys accessKeyId,
  // secretAccessKey, sessionToken).
  SourceSpec source;
  int64_t bandwidthBytesPerSecond = 0;  // 0 unlimited
  // The nodes a restore reads before the origin: name and address (host:port).
  std::vector<std::pair<std::string, std::string>> peers;
};

// Whether the volume is a checkpoint volume rather than a Dataset's.
bool namesCheckpoints(const PublishFields& fields);
// InvalidArgument naming the field and the fix, as parsePublication, for a uri that is not s3://
// or file:///, a bandwidthLimit that is not a positive number, an unknown attribute, or a Secret
// with only one of accessKeyId and secretAccessKey, or checkpointPeers not "node=host:port,...".
Result<CheckpointPublication> parseCheckpointPublication(const PublishFields& fields);

// A publication as the node records it (one line, tab-separated), with the dataset generation
// its pod sees, so that a restarted node can repair the pod's view. For a view (a Dataset that
// refers to another) the dataset served is the view's source, at the view's directory.
struct PublicationRecord {
  Publication publication;
  int64_t generation = 0;
  std::string servedNamespace, servedName;  // the publication's own dataset unless a view
  std::string path;                         // the directory of it bound; "" for its root
};
std::string formatRecord(const PublicationRecord& record);
// Nullopt for a line that is not a record. A record without the served dataset (written before
// views existed) serves the publication's own.
std::optional<PublicationRecord> parseRecord(const std::string& line);

}  // namespace granary::cache
