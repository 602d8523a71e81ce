// Dataset (granary.io/v1alpha1): what to cache and where. Mirrors crds/granary.io_datasets.yaml;
// decodeValue applies the same defaults and the same cross-field rules as the CRD's schema
// and CEL validations, so a manifest that granaryctl accepts is one the API server accepts.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/api/object_meta.h"
#include "common/api/scheduling.h"
#include "common/config.h"
#include "common/quantity.h"

namespace granary::api {

// The kind of origin, from the URI scheme.
enum class SourceKind { kS3, kHttp, kFile };

// Returns the kind for s3://, http://, https:// and file:// URIs; InvalidArgument naming the
// supported schemes otherwise (and, for pvc://, how to reach a claim's files instead).
Result<SourceKind> sourceKindOf(std::string_view uri);

struct SecretRef {
  std::string name;  // a Secret in the Dataset's namespace
};

struct Source {
  std::string uri;
  std::string endpoint;  // s3 only
  std::string region;    // s3 only
  std::optional<SecretRef> secretRef;
  std::map<std::string, std::string> options;
};

// Decodes the fields of a source (uri, endpoint, region, secretRef, options) from `f`, then
// checks the URI against the fields that belong to one kind of origin (the CRD's CEL rules).
void readSource(config::Fields& f, Source& out);

// A source shown as a sub-directory of the dataset; name "" is the dataset root.
struct Mount {
  std::string name;
  Source source;
};

enum class EvictionPolicy { kPin, kLru };
enum class WarmPolicy { kOnCreate, kOnJob, kNever };

struct CacheSpec {
  int32_t replicas = 1;                     // copies of each file across nodes, 1..16
  std::optional<ByteSize> capacityPerNode;  // unset: the node's default quota
  std::map<std::string, std::string> nodeSelector;
  std::optional<NodeAffinity> nodeAffinity;
  std::vector<Toleration> tolerations;
  EvictionPolicy policy = EvictionPolicy::kPin;
  WarmPolicy warm = WarmPolicy::kOnCreate;
  std::optional<ByteSize> bandwidthLimit;  // origin bytes/s per node; unset: unlimited
  ByteSize chunkSize{16 << 20};            // 1Mi..1Gi
};

// spec.source.uri dataset://<namespace>/<name>[/<path>]: a read-only view of another
// Dataset's cached bytes (the whole dataset, or one directory of it), which that Dataset offers
// to this namespace in its spec.sharing.
struct DatasetReference {
  std::string ns, name;
  std::string path;  // "" for the whole dataset; else relative, without "", "." or ".." segments

  std::string key() const { return ns + "/" + name; }  // the source's "namespace/name"
  bool operator==(const DatasetReference&) const = default;
};

// True for a URI of the dataset:// scheme.
bool isDatasetUri(std::string_view uri);
// The reference a dataset:// URI names; InvalidArgument saying the expected form otherwise.
Result<DatasetReference> parseDatasetUri(std::string_view uri);

// spec.sharing: the namespaces whose Datasets may refer to this one.
struct Sharing {
  std::vector<std::string> namespaces;
};

// spec.refresh: how the Dataset follows its origin (docs/operator.md, "Refresh and versions").
struct RefreshPolicy {
  // List the origin again this long after the last refresh; unset: only when asked (the
  // granary.io/refresh-requested annotation).
  std::optional<std::chrono::nanoseconds> interval;
};

struct DatasetSpec {
  // spec.source becomes the single mount named ""; spec.mounts[] are taken as they are. Empty
  // for a reference.
  std::vector<Mount> mounts;
  // Set when spec.source.uri is dataset://: the Dataset is cached by its source's settings, so
  // its spec.cache keeps its defaults.
  std::optional<DatasetReference> reference;
  Sharing sharing;
  CacheSpec cache;
  RefreshPolicy refresh;
};

// Whether `spec` offers its cached bytes to Datasets of namespace `ns`.
bool offersTo(const DatasetSpec& spec, std::string_view ns);

struct Dataset {
  ObjectMeta metadata;
  DatasetSpec spec;
};

// status.phase of a Dataset: its cache nodes' phases combined (docs/operator.md, "Phases").
// Pending: not on any node yet; Listing: the origin is being listed; Warming: warming by policy;
// Ready: every node of the set holds its whole share; OnDemand: served, filled only as files are
// read (warm: Never, or OnJob before a job asked); QuotaFull: served, but a node's Pin quota
// filled before its share was cached; Degraded: a node failing or lost; Failed: the spec or the
// origin cannot be served.
enum class DatasetPhase {
  kPending,
  kListing,
  kWarming,
  kReady,
  kDegraded,
  kFailed,
  kOnDemand,
  kQuotaFull
};
// The name status.phase and the CRD's enum use, e.g. "OnDemand".
std::string_view datasetPhaseName(DatasetPhase phase);
// The phase named `name`; nullopt for any other text (an empty or unknown status.phase).
std::optional<DatasetPhase> datasetPhaseOf(std::string_view name);
// Whether a job waiting for its datasets (warmPolicy BeforeStart) may start on a dataset in
// `phase`: Ready, or settled short of it by the dataset's own settings (OnDemand under warm:
// Never, which nothing will warm; QuotaFull, where what fits is cached). The operator and
// granaryctl run both start jobs by it.
bool letsWaitingJobsStart(DatasetPhase phase, WarmPolicy warm);

// Decodes `spec` of a Dataset (defaults applied, every rule checked).
Status decodeValue(const config::Node& node, SecretRef& out);
Status decodeValue(const config::Node& node, Source& out);
Status decodeValue(const config::Node& node, Mount& out);
Status decodeValue(const config::Node& node, EvictionPolicy& out);
Status decodeValue(const config::Node& node, WarmPolicy& out);
Status decodeValue(const config::Node& node, CacheSpec& out);
Status decodeValue(const config::Node& node, Sharing& out);
Status decodeValue(const config::Node& node, RefreshPolicy& out);
Status decodeValue(const config::Node& node, DatasetSpec& out);

std::string_view sourceKindName(SourceKind kind);
std::string_view evictionPolicyName(EvictionPolicy policy);
std::string_view warmPolicyName(WarmPolicy policy);

}  // namespace granary::api
