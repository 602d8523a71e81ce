#include "cache-node/csi/publication.h"

namespace granary::cache {
namespace {

std::string valueOf(const std::map<std::string, std::string>& context, const std::string& key) {
  const auto it = context.find(key);
  return it == context.end() ? "" : it->second;
}

}  // namespace

Result<Publication> parsePublication(const PublishFields& fields) {
  if (fields.volumeId.empty()) return invalidArgument("volume_id: must be set");
  if (fields.targetPath.empty() || fields.targetPath.front() != '/')
    return invalidArgument("target_path: must be an absolute path");
  if (!fields.hasCapability) return invalidArgument("volume_capability: must be set");
  if (fields.blockAccess) {
    return invalidArgument(
        "volume_capability: granary volumes are read-only file systems; request a mount, not a "
        "block device");
  }
  const auto& context = fields.volumeContext;
  if (valueOf(context, "csi.storage.k8s.io/ephemeral") != "true") {
    return invalidArgument(
        "volume_context: granary serves CSI ephemeral inline volumes (a pod's "
        "spec.volumes[].csi with driver csi.granary.io) and needs podInfoOnMount: true on the "
        "CSIDriver");
  }
  Publication p;
  p.volumeId = fields.volumeId;
  p.targetPath = fields.targetPath;
  p.podNamespace = valueOf(context, "csi.storage.k8s.io/pod.namespace");
  p.podName = valueOf(context, "csi.storage.k8s.io/pod.name");
  p.podUid = valueOf(context, "csi.storage.k8s.io/pod.uid");
  if (p.podNamespace.empty() || p.podName.empty() || p.podUid.empty()) {
    return invalidArgument(
        "volume_context: the pod's namespace, name and uid are missing; set podInfoOnMount: true "
        "on the CSIDriver csi.granary.io");
  }
  p.datasetName = valueOf(context, "dataset");
  if (p.datasetName.empty()) {
    return invalidArgument(
        "volumeAttributes.dataset: name the Dataset to mount (in the pod's namespace)");
  }
  const std::string ns = valueOf(context, "namespace");
  if (!ns.empty() && ns != p.podNamespace) {
    return Status(StatusCode::kPermissionDenied,
                  "volumeAttributes.namespace: a pod may mount only Datasets of its own namespace "
                  "(\"" +
                      p.podNamespace + "\"), not of \"" + ns + "\"");
  }
  for (const auto& [key, value] : context) {
    if (key.starts_with("csi.storage.k8s.io/") || key == "dataset" || key == "namespace") continue;
    return invalidArgument("volumeAttributes." + key +
                           ": unknown; granary reads \"dataset\" and \"namespace\"");
  }
  p.datasetNamespace = p.podNamespace;
  return p;
}

}  // namespace granary::cache
