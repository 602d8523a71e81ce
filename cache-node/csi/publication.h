// What a CSI NodePublishVolume asks for, checked: which Dataset, for which pod, where. Pure: the
// gRPC adapter (csi_service) hands it the request's fields and maps the Status to gRPC codes.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "common/result.h"

namespace granary::cache {

struct Publication {
  std::string volumeId;
  std::filesystem::path targetPath;
  std::string datasetNamespace;  // always the pod's namespace
  std::string datasetName;
  // The version of the Dataset to mount (volumeAttributes.version: a TrainingJob keeps the one
  // its workers first read); 0 for the newest on the node.
  int64_t version = 0;
  std::string podNamespace, podName, podUid;
};

struct PublishFields {
  std::string volumeId;
  std::string targetPath;
  bool hasCapability = false;
  bool blockAccess = false;
  std::map<std::string, std::string> volumeContext;  // volumeAttributes plus kubelet's pod keys
};

// InvalidArgument naming the field and the fix for a missing volume id or target, a block
// volume, a volume that is not an ephemeral inline one, a missing `dataset` attribute or pod
// information (the CSIDriver needs podInfoOnMount), or a tab or newline in a field the record
// keeps; PermissionDenied when the `namespace` attribute names another namespace than the pod's.
Result<Publication> parsePublication(const PublishFields& fields);

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
