#include "cache-node/csi/publication.h"

#include <charconv>
#include <vector>

#include "common/names.h"

namespace granary::cache {
namespace {

std::string valueOf(const std::map<std::string, std::string>& context, const std::string& key) {
  const auto it = context.find(key);
  return it == context.end() ? "" : it->second;
}

// What every granary volume needs: a volume id, an absolute target, a mounted (not block)
// ephemeral inline volume and the pod's identity; a Publication with those filled.
Result<Publication> checkPod(const PublishFields& fields) {
  if (fields.volumeId.empty()) return invalidArgument("volume_id: must be set");
  if (fields.targetPath.empty() || fields.targetPath.front() != '/' ||
      fields.targetPath.find_first_of("\t\n") != std::string::npos)
    return invalidArgument("target_path: must be an absolute path without tabs or newlines");
  if (!fields.hasCapability) return invalidArgument("volume_capability: must be set");
  if (fields.blockAccess) {
    return invalidArgument(
        "volume_capability: granary volumes are file systems; request a mount, not a block "
        "device");
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
  // A record is one line of tab-separated fields (formatRecord): a tab or a newline in one
  // would make the node misread it after a restart.
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string&>{"volume_id", p.volumeId},
        {"volume_context: the pod's namespace", p.podNamespace},
        {"volume_context: the pod's name", p.podName},
        {"volume_context: the pod's uid", p.podUid}}) {
    if (value.find_first_of("\t\n") != std::string::npos) {
      return invalidArgument(std::string(name) + ": must not contain tabs or newlines");
    }
  }
  return p;
}

}  // namespace

Result<Publication> parsePublication(const PublishFields& fields) {
  GRANARY_ASSIGN_OR_RETURN(Publication p, checkPod(fields));
  const auto& context = fields.volumeContext;
  p.datasetName = valueOf(context, names::kCsiDatasetAttribute);
  if (p.datasetName.empty()) {
    return invalidArgument(
        "volumeAttributes.dataset: name the Dataset to mount (in the pod's namespace)");
  }
  if (p.datasetName.find_first_of("\t\n") != std::string::npos)
    return invalidArgument("volumeAttributes.dataset: must not contain tabs or newlines");
  const std::string ns = valueOf(context, names::kCsiNamespaceAttribute);
  if (!ns.empty() && ns != p.podNamespace) {
    return Status(StatusCode::kPermissionDenied,
                  "volumeAttributes.namespace: a pod may mount only Datasets of its own namespace "
                  "(\"" +
                      p.podNamespace + "\"), not of \"" + ns + "\"");
  }
  if (const std::string version = valueOf(context, names::kCsiVersionAttribute); !version.empty()) {
    const auto [end, error] =
        std::from_chars(version.data(), version.data() + version.size(), p.version);
    if (error != std::errc() || end != version.data() + version.size() || p.version <= 0) {
      return invalidArgument("volumeAttributes.version: \"" + version +
                             "\" is not a version; give a Dataset's status.version, or leave it "
                             "out for the newest");
    }
  }
  if (const std::string warmFirst = valueOf(context, names::kCsiWarmFirstAttribute);
      !warmFirst.empty()) {
    if (warmFirst != "true" && warmFirst != "false") {
      return invalidArgument("volumeAttributes.warmFirst: \"" + warmFirst +
                             "\" is not a boolean; give \"true\" or \"false\"");
    }
    p.warmFirst = warmFirst == "true";
  }
  for (const auto& [key, value] : context) {
    if (key.starts_with("csi.storage.k8s.io/") || key == names::kCsiDatasetAttribute ||
        key == names::kCsiNamespaceAttribute || key == names::kCsiVersionAttribute ||
        key == names::kCsiWarmFirstAttribute)
      continue;
    return invalidArgument("volumeAttributes." + key +
                           ": unknown; granary reads \"dataset\", \"namespace\", \"version\" "
                           "and \"warmFirst\"");
  }
  p.datasetNamespace = p.podNamespace;
  return p;
}

bool namesCheckpoints(const PublishFields& fields) {
  return fields.volumeContext.contains(names::kCsiCheckpointsAttribute);
}

Result<CheckpointPublication> parseCheckpointPublication(const PublishFields& fields) {
  GRANARY_ASSIGN_OR_RETURN(const Publication pod, checkPod(fields));
  CheckpointPublication p{.volumeId = pod.volumeId,
                          .targetPath = pod.targetPath,
                          .podNamespace = pod.podNamespace,
                          .podName = pod.podName,
                          .podUid = pod.podUid};
  const auto& context = fields.volumeContext;
  p.source.uri = valueOf(context, names::kCsiCheckpointsAttribute);
  p.source.ns = p.podNamespace;  // whose directories of the roots of namespaces it may use
  if (!p.source.uri.starts_with("s3://") && !p.source.uri.starts_with("file:///"))
    return invalidArgument("volumeAttributes.checkpoints: \"" + p.source.uri +
                           "\" is not an s3:// or file:/// URI; checkpoints are written to one");
  p.source.endpoint = valueOf(context, names::kCsiEndpointAttribute);
  p.source.region = valueOf(context, names::kCsiRegionAttribute);
  if (const std::string limit = valueOf(context, names::kCsiBandwidthLimitAttribute);
      !limit.empty()) {
    const auto [end, error] =
        std::from_chars(limit.data(), limit.data() + limit.size(), p.bandwidthBytesPerSecond);
    if (error != std::errc() || end != limit.data() + limit.size() ||
        p.bandwidthBytesPerSecond <= 0)
      return invalidArgument("volumeAttributes.bandwidthLimit: \"" + limit +
                             "\" is not a number of bytes per second above zero");
  }
  const std::string peers = valueOf(context, names::kCsiCheckpointPeersAttribute);
  for (size_t start = 0; start < peers.size();) {
    const size_t comma = std::min(peers.find(',', start), peers.size());
    const std::string peer = peers.substr(start, comma - start);
    const size_t equals = peer.find('=');
    if (equals == 0 || equals == std::string::npos || equals + 1 == peer.size())
      return invalidArgument("volumeAttributes.checkpointPeers: \"" + peer +
                             "\" is not node=host:port");
    p.peers.emplace_back(peer.substr(0, equals), peer.substr(equals + 1));
    start = comma + 1;
  }
  for (const auto& [key, value] : context) {
    if (key.starts_with(names::kCsiOptionAttributePrefix)) {
      p.source.options[key.substr(std::string_view(names::kCsiOptionAttributePrefix).size())] =
          value;
    } else if (!key.starts_with("csi.storage.k8s.io/") && key != names::kCsiCheckpointsAttribute &&
               key != names::kCsiEndpointAttribute && key != names::kCsiRegionAttribute &&
               key != names::kCsiBandwidthLimitAttribute &&
               key != names::kCsiCheckpointPeersAttribute) {
      return invalidArgument("volumeAttributes." + key +
                             ": unknown; a checkpoint volume reads \"checkpoints\", \"endpoint\", "
                             "\"region\", \"bandwidthLimit\", \"checkpointPeers\" and "
                             "\"option.<name>\"");
    }
  }
  // The volume's record is one line of tab-separated fields, options as name=value
  // (checkpoint_volumes.h): nothing recorded may hold a tab or a newline, no option name a '='.
  const auto recordable = [](const std::string& text) {
    return text.find_first_of("\t\n") == std::string::npos;
  };
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string&>{names::kCsiCheckpointsAttribute, p.source.uri},
        {names::kCsiEndpointAttribute, p.source.endpoint},
        {names::kCsiRegionAttribute, p.source.region}})
    if (!recordable(value))
      return invalidArgument("volumeAttributes." + std::string(name) +
                             ": must not contain tabs or newlines");
  for (const auto& [key, value] : p.source.options)
    if (!recordable(key) || !recordable(value) || key.find('=') != std::string::npos)
      return invalidArgument("volumeAttributes." + std::string(names::kCsiOptionAttributePrefix) +
                             key +
                             ": option names and values must not contain tabs or newlines, "
                             "nor names an '='");
  // The Secret the volume's nodePublishSecretRef names, as the kubelet hands it over.
  const auto secret = [&](const char* key) { return Secret(valueOf(fields.secrets, key)); };
  p.source.accessKeyId = secret("accessKeyId");
  p.source.secretAccessKey = secret("secretAccessKey");
  p.source.sessionToken = secret("sessionToken");
  if (p.source.accessKeyId.empty() != p.source.secretAccessKey.empty())
    return invalidArgument(
        "nodePublishSecretRef: the Secret named by spec.checkpoints.secretRef needs both "
        "accessKeyId and secretAccessKey; add the missing one");
  return p;
}

std::string formatRecord(const PublicationRecord& record) {
  const Publication& p = record.publication;
  std::string line;
  for (const std::string& field :
       {p.targetPath.string(), p.volumeId, p.datasetNamespace, p.datasetName,
        std::to_string(record.generation), p.podNamespace, p.podName, p.podUid,
        record.servedNamespace, record.servedName, record.path}) {
    line += (line.empty() ? "" : "\t") + field;
  }
  return line;
}

std::optional<PublicationRecord> parseRecord(const std::string& line) {
  // Split on every tab: getline() would drop an empty last field, so a record whose last field
  // is empty would not read back, and one with a stray tab at the end would.
  std::vector<std::string> fields;
  for (size_t start = 0;;) {
    const size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab - start));
    if (tab == std::string::npos) break;
    start = tab + 1;
  }
  if ((fields.size() != 8 && fields.size() != 11) || fields[0].empty() || fields[0].front() != '/')
    return std::nullopt;
  PublicationRecord record;
  Publication& p = record.publication;
  p.targetPath = fields[0];
  p.volumeId = fields[1];
  p.datasetNamespace = fields[2];
  p.datasetName = fields[3];
  try {
    record.generation = std::stoll(fields[4]);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  p.podNamespace = fields[5];
  p.podName = fields[6];
  p.podUid = fields[7];
  const bool served = fields.size() == 11;
  record.servedNamespace = served ? fields[8] : p.datasetNamespace;
  record.servedName = served ? fields[9] : p.datasetName;
  record.path = served ? fields[10] : "";
  return record;
}

}  // namespace granary::cache
