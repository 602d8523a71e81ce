#include "common/api/dataset.h"

#include <algorithm>
#include <set>
#include <utility>

namespace granary::api {
namespace {

// A PersistentVolumeClaim is not an origin: nothing on a cache node can mount another
// namespace's claim. This says how to reach its files instead.
constexpr std::string_view kPvcFix =
    " (pvc:// is not supported: serve the claim's files over http(s):// from a pod that mounts "
    "it, or copy them to s3://)";

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// A mount name is one path segment: the sub-directory the source appears under.
bool isMountName(const std::string& name) {
  return isDnsLabel(name) ||
         (!name.empty() && name.size() <= 63 && name.find_first_of("/\\") == std::string::npos &&
          name != "." && name != ".." && name.find('\0') == std::string::npos);
}

}  // namespace

void readSource(config::Fields& f, Source& out) {
  const config::Node* uri = f.required("uri", out.uri);
  const config::Node* endpoint = f.optional("endpoint", out.endpoint);
  const config::Node* region = f.optional("region", out.region);
  const config::Node* secretRef = f.optional("secretRef", out.secretRef);
  f.optional("options", out.options);
  if (!uri) return;

  auto kind = sourceKindOf(out.uri);
  if (!kind.isOk()) {
    f.fail(config::expected(*uri, "a URI starting with s3://, http://, https://, or file://" +
                                      std::string(startsWith(out.uri, "pvc://") ? kPvcFix : "")));
    return;
  }
  const std::string_view rest = std::string_view(out.uri).substr(out.uri.find("://") + 3);
  switch (*kind) {
    case SourceKind::kS3:
      if (rest.empty() || rest.front() == '/') {
        f.fail(config::expected(*uri, "s3://<bucket>/<prefix>"));
      }
      break;
    case SourceKind::kFile:
      if (rest.empty() || rest.front() != '/') {
        f.fail(config::expected(*uri, "an absolute path: file:///path/on/the/node"));
      }
      break;
    case SourceKind::kHttp:
      if (rest.empty() || rest.front() == '/')
        f.fail(config::expected(*uri, "http(s)://<host>/<path>"));
      break;
  }
  if (*kind != SourceKind::kS3) {
    if (endpoint)
      f.fail(config::expected(*endpoint, "no endpoint: it applies to s3:// sources only"));
    if (region) f.fail(config::expected(*region, "no region: it applies to s3:// sources only"));
  }
  if (*kind == SourceKind::kFile && secretRef) {
    f.fail(config::expected(*secretRef, "no secretRef: file:// sources take no credentials"));
  }
  if (endpoint && !startsWith(out.endpoint, "http://") && !startsWith(out.endpoint, "https://")) {
    f.fail(config::expected(*endpoint, "an http:// or https:// URL"));
  }
}

namespace {

// A dataset:// source names another Dataset; everything else about its origin is that
// Dataset's.
Status decodeReference(const config::Node& source, std::optional<DatasetReference>& out) {
  config::Fields f(source);
  std::string uri;
  const config::Node* node = f.required("uri", uri);
  for (const char* field : {"endpoint", "region", "secretRef", "options"}) {
    if (const config::Node* set = source.find(field)) {
      f.fail(config::expected(*set, std::string("no ") + field +
                                        ": a dataset:// source takes its origin, settings and "
                                        "credentials from the Dataset it names"));
    }
  }
  f.allow({"endpoint", "region", "secretRef", "options"});
  if (node) {
    auto reference = parseDatasetUri(uri);
    if (reference.isOk()) {
      out = std::move(*reference);
    } else {
      f.fail(config::expected(*node, reference.status().message()));
    }
  }
  return f.finish();
}

// Whether `cache` is what the CRD's defaults make of an empty spec.cache.
bool isDefaultCache(const CacheSpec& cache) {
  const CacheSpec none;
  return cache.replicas == none.replicas && !cache.capacityPerNode && cache.nodeSelector.empty() &&
         !cache.nodeAffinity && cache.tolerations.empty() && cache.policy == none.policy &&
         cache.warm == none.warm && !cache.bandwidthLimit &&
         cache.chunkSize.bytes == none.chunkSize.bytes;
}

}  // namespace

bool isDatasetUri(std::string_view uri) { return startsWith(uri, "dataset://"); }

Result<DatasetReference> parseDatasetUri(std::string_view uri) {
  const auto invalid = [] {
    return invalidArgument(
        "dataset://<namespace>/<name>, or dataset://<namespace>/<name>/<directory>: a Dataset "
        "that offers itself to this namespace, and a path in it without \".\" or \"..\"");
  };
  if (!isDatasetUri(uri)) return invalid();
  std::vector<std::string> segments;
  std::string_view rest = uri.substr(std::string_view("dataset://").size());
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    segments.emplace_back(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  if (segments.size() < 2 || !isDnsLabel(segments[0]) || !isDnsSubdomain(segments[1]))
    return invalid();
  DatasetReference reference{segments[0], segments[1], ""};
  for (size_t i = 2; i < segments.size(); ++i) {
    const std::string& segment = segments[i];
    if (segment.empty() && i + 1 == segments.size()) break;  // a trailing "/"
    if (segment.empty() || segment == "." || segment == ".." ||
        segment.find('\0') != std::string::npos)
      return invalid();
    reference.path += (reference.path.empty() ? "" : "/") + segment;
  }
  return reference;
}

bool offersTo(const DatasetSpec& spec, std::string_view ns) {
  return std::find(spec.sharing.namespaces.begin(), spec.sharing.namespaces.end(), ns) !=
         spec.sharing.namespaces.end();
}

Status decodeValue(const config::Node& node, Sharing& out) {
  config::Fields f(node);
  const config::Node* namespaces = f.optional(
      "namespaces", out.namespaces,
      [](const std::vector<std::string>& list) {
        return list.size() <= 256 &&
               std::all_of(list.begin(), list.end(), [](const auto& n) { return isDnsLabel(n); });
      },
      "a list of at most 256 namespace names");
  std::set<std::string> seen;
  for (size_t i = 0; namespaces && i < out.namespaces.size(); ++i) {
    if (!seen.insert(out.namespaces[i]).second)
      f.fail(config::expected(namespaces->items()[i], "a namespace listed once"));
  }
  return f.finish();
}

Status decodeValue(const config::Node& node, SecretRef& out) {
  config::Fields f(node);
  f.required("name", out.name, isDnsSubdomain, "the name of a Secret in the same namespace");
  return f.finish();
}

Status decodeValue(const config::Node& node, Source& out) {
  config::Fields f(node);
  readSource(f, out);
  return f.finish();
}

Status decodeValue(const config::Node& node, Mount& out) {
  config::Fields f(node);
  f.required("name", out.name, isMountName, "a directory name (no '/', at most 63 characters)");
  readSource(f, out.source);
  return f.finish();
}

Status decodeValue(const config::Node& node, EvictionPolicy& out) {
  return config::decodeEnum(node, out,
                            {{"Pin", EvictionPolicy::kPin}, {"LRU", EvictionPolicy::kLru}});
}

Status decodeValue(const config::Node& node, WarmPolicy& out) {
  return config::decodeEnum(node, out,
                            {{"OnCreate", WarmPolicy::kOnCreate},
                             {"OnJob", WarmPolicy::kOnJob},
                             {"Never", WarmPolicy::kNever}});
}

Status decodeValue(const config::Node& node, CacheSpec& out) {
  config::Fields f(node);
  f.optional(
      "replicas", out.replicas, [](int32_t r) { return r >= 1 && r <= 16; },
      "an integer from 1 to 16");
  f.optional(
      "capacityPerNode", out.capacityPerNode,
      [](const std::optional<ByteSize>& s) { return s->bytes > 0; }, "a size above zero");
  f.optional("nodeSelector", out.nodeSelector);
  f.optional("nodeAffinity", out.nodeAffinity);
  f.optional("tolerations", out.tolerations);
  f.optional("policy", out.policy);
  f.optional("warm", out.warm);
  f.optional(
      "bandwidthLimit", out.bandwidthLimit,
      [](const std::optional<ByteSize>& s) { return s->bytes > 0; },
      "a rate above zero in bytes per second, such as 200Mi");
  f.optional(
      "chunkSize", out.chunkSize,
      [](ByteSize s) { return s.bytes >= (1 << 20) && s.bytes <= (1 << 30); },
      "a size from 1Mi to 1Gi");
  return f.finish();
}

Result<SourceKind> sourceKindOf(std::string_view uri) {
  if (startsWith(uri, "s3://")) return SourceKind::kS3;
  if (startsWith(uri, "http://") || startsWith(uri, "https://")) return SourceKind::kHttp;
  if (startsWith(uri, "file://")) return SourceKind::kFile;
  return invalidArgument("\"" + std::string(uri) +
                         "\" has no supported scheme; use s3://, http://, https:// or file://" +
                         std::string(startsWith(uri, "pvc://") ? kPvcFix : ""));
}

Status decodeValue(const config::Node& node, RefreshPolicy& out) {
  config::Fields f(node);
  std::chrono::nanoseconds interval{0};
  if (const config::Node* given = f.optional(
          "interval", interval, [](std::chrono::nanoseconds d) { return d.count() > 0; },
          "a duration above zero, such as 1h or 30m")) {
    if (given->isScalar() &&
        given->scalar().find_first_not_of("0123456789hms") != std::string::npos)
      f.fail(config::expected(*given, "a duration in hours, minutes and seconds, such as 1h30m"));
    out.interval = interval;
  }
  return f.finish();
}

Status decodeValue(const config::Node& node, DatasetSpec& out) {
  config::Fields f(node);
  const config::Node* source = node.find("source");
  const config::Node* mounts = node.find("mounts");
  const config::Node* uri = source && !source->isNull() ? source->find("uri") : nullptr;
  const bool reference = uri && uri->isScalar() && isDatasetUri(uri->scalar());
  if (reference) {
    if (Status decoded = decodeReference(*source, out.reference); !decoded.isOk()) f.fail(decoded);
    f.allow({"source"});
  } else if (source && !source->isNull()) {
    Mount root;
    f.optional("source", root.source);
    out.mounts = {root};
  }
  if (mounts && !mounts->isNull()) {
    if (source && !source->isNull()) {
      f.fail(invalidArgument(node.where() + ": set either source or mounts, not both"));
    }
    f.optional(
        "mounts", out.mounts,
        [](const std::vector<Mount>& m) { return !m.empty() && m.size() <= 32; },
        "a list of 1 to 32 mounts");
    std::set<std::string> names;
    for (size_t i = 0; i < out.mounts.size(); ++i) {
      if (!names.insert(out.mounts[i].name).second) {
        f.fail(config::expected(mounts->items()[i],
                                "a mount name used once (\"" + out.mounts[i].name + "\" repeats)"));
      }
    }
  }
  f.allow({"source", "mounts"});
  if ((!source || source->isNull()) && (!mounts || mounts->isNull())) {
    f.fail(invalidArgument(node.where() + ": set source (one origin) or mounts (several)"));
  }
  f.optional("cache", out.cache);
  if (const config::Node* refresh = f.optional("refresh", out.refresh);
      reference && refresh && !refresh->isNull()) {
    f.fail(config::expected(*refresh,
                            "no refresh: a Dataset that refers to another (dataset://) follows "
                            "its source's versions; set spec.refresh on the source"));
  }
  const config::Node* sharing = f.optional("sharing", out.sharing);
  if (reference && sharing && !out.sharing.namespaces.empty()) {
    f.fail(config::expected(*sharing,
                            "no sharing: a Dataset that refers to another cannot offer it again; "
                            "the source Dataset offers itself"));
  }
  if (reference && !isDefaultCache(out.cache)) {
    f.fail(config::expected(*node.find("cache"),
                            "no cache settings: a Dataset that refers to another (dataset://) is "
                            "cached by its source's; remove spec.cache"));
  }
  return f.finish();
}

std::string_view sourceKindName(SourceKind kind) {
  switch (kind) {
    case SourceKind::kS3:
      return "s3";
    case SourceKind::kHttp:
      return "http";
    case SourceKind::kFile:
      return "file";
  }
  return "unknown";
}

std::string_view evictionPolicyName(EvictionPolicy policy) {
  return policy == EvictionPolicy::kPin ? "Pin" : "LRU";
}

std::string_view warmPolicyName(WarmPolicy policy) {
  switch (policy) {
    case WarmPolicy::kOnCreate:
      return "OnCreate";
    case WarmPolicy::kOnJob:
      return "OnJob";
    case WarmPolicy::kNever:
      return "Never";
  }
  return "OnCreate";
}

namespace {

constexpr std::pair<DatasetPhase, std::string_view> kDatasetPhaseNames[] = {
    {DatasetPhase::kPending, "Pending"},   {DatasetPhase::kListing, "Listing"},
    {DatasetPhase::kWarming, "Warming"},   {DatasetPhase::kReady, "Ready"},
    {DatasetPhase::kDegraded, "Degraded"}, {DatasetPhase::kFailed, "Failed"},
    {DatasetPhase::kOnDemand, "OnDemand"}, {DatasetPhase::kQuotaFull, "QuotaFull"}};

}  // namespace

std::string_view datasetPhaseName(DatasetPhase phase) {
  for (const auto& [value, name] : kDatasetPhaseNames)
    if (value == phase) return name;
  return "Pending";
}

std::optional<DatasetPhase> datasetPhaseOf(std::string_view name) {
  for (const auto& [value, text] : kDatasetPhaseNames)
    if (text == name) return value;
  return std::nullopt;
}

bool letsWaitingJobsStart(DatasetPhase phase, WarmPolicy warm) {
  return phase == DatasetPhase::kReady || phase == DatasetPhase::kQuotaFull ||
         (phase == DatasetPhase::kOnDemand && warm == WarmPolicy::kNever);
}

}  // namespace granary::api
