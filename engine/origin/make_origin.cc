#include "engine/origin/make_origin.h"

#include <optional>

#include "engine/origin/beneath.h"
#include "engine/origin/http_origin.h"
#include "engine/origin/s3_origin.h"

namespace granary::cache {
namespace {

Status unknownOptions(const SourceSpec& source, std::initializer_list<std::string_view> known) {
  for (const auto& [name, _] : source.options) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return invalidArgument("options." + name + ": not an option of this source (" +
                             (list.empty() ? std::string("it takes none") : "known: " + list) +
                             ")");
    }
  }
  return Status::ok();
}

}  // namespace

Result<S3OriginOptions> s3OptionsOf(const SourceSpec& source) {
  GRANARY_RETURN_IF_ERROR(unknownOptions(source, {"addressing"}));
  GRANARY_ASSIGN_OR_RETURN(S3Location location, parseS3Uri(source.uri));
  S3OriginOptions options;
  options.bucket = location.bucket;
  options.prefix = location.prefix;
  options.endpoint = source.endpoint;
  if (!source.region.empty()) options.region = source.region;
  if (auto it = source.options.find("addressing"); it != source.options.end()) {
    if (it->second != "path" && it->second != "virtual")
      return invalidArgument("options.addressing: must be \"path\" or \"virtual\"");
    options.pathStyle = it->second == "path";
  }
  options.accessKeyId = source.accessKeyId;
  options.secretAccessKey = source.secretAccessKey;
  options.sessionToken = source.sessionToken;
  return options;
}

namespace {

Result<std::unique_ptr<Origin>> makeHttp(const SourceSpec& source) {
  GRANARY_RETURN_IF_ERROR(unknownOptions(source, {"index"}));
  HttpOriginOptions options;
  options.baseUrl = source.uri;
  if (auto it = source.options.find("index"); it != source.options.end())
    options.index = it->second;
  options.bearerToken = source.bearerToken;
  return makeHttpOrigin(std::move(options));
}

}  // namespace

namespace {

// A root as errors name it, the node's own directory (canonical) and the directory of `ns`
// beneath it (the root itself when shared); nullopt for a root that does not exist on the node.
struct RootOnNode {
  OriginRoot named;
  std::filesystem::path canonical;
  std::filesystem::path directory;
};

std::optional<RootOnNode> onNode(OriginRoot named, const std::string& ns) {
  std::error_code error;
  const std::filesystem::path canonical = std::filesystem::canonical(named.before, error);
  if (error) return std::nullopt;
  std::filesystem::path directory = canonical;
  if (!named.shared) {
    directory /= ns;
    if (!named.after.empty()) directory /= named.after;
  }
  return RootOnNode{std::move(named), canonical, std::move(directory)};
}

}  // namespace

Result<LocatedSource> locateFileSource(const SourceSpec& source, const OriginSettings& settings) {
  const std::string& option = settings.rootsOption;
  std::vector<OriginRoot> named;
  for (const auto& root : settings.fileOriginRoots)
    named.push_back({.text = root.string(), .shared = true, .before = root.string()});
  named.insert(named.end(), settings.namespaceRoots.begin(), settings.namespaceRoots.end());
  if (named.empty()) return noRootsError(source.uri, option);
  std::error_code error;
  std::filesystem::path resolved =
      std::filesystem::weakly_canonical(source.uri.substr(7), error).lexically_normal();
  if (error || !resolved.is_absolute()) return outsideRootsError(source.uri, named, option);
  if (resolved.has_relative_path() && !resolved.has_filename()) resolved = resolved.parent_path();
  std::optional<RootOnNode> best;
  const RootOnNode* other = nullptr;
  std::vector<RootOnNode> roots;
  for (const auto& root : named)
    if (auto found = onNode(root, source.ns)) roots.push_back(std::move(*found));
  for (const auto& root : roots) {
    const bool ours = root.named.shared || isNamespaceName(source.ns);
    if (ours && isWithin(resolved, root.directory)) {
      if (!best || best->directory.string().size() < root.directory.string().size()) best = root;
    } else if (!root.named.shared && isWithin(resolved, root.canonical)) {
      other = &root;
    }
  }
  if (!best && other) return otherNamespaceError(source.uri, source.ns, other->named, option);
  if (!best) return outsideRootsError(source.uri, named, option);
  std::filesystem::path relative = resolved.lexically_relative(best->directory);
  if (relative == ".") relative.clear();
  std::filesystem::path fromAbove = best->directory.lexically_relative(best->canonical);
  if (fromAbove == ".") fromAbove.clear();
  return LocatedSource{.root = best->directory,
                       .relative = std::move(relative),
                       .above = best->canonical,
                       .fromAbove = std::move(fromAbove)};
}

Result<std::unique_ptr<Origin>> makeOrigin(const SourceSpec& source,
                                           const OriginSettings& settings) {
  const std::string& uri = source.uri;
  if (!source.endpoint.empty() && !uri.starts_with("s3://"))
    return invalidArgument("endpoint: only s3:// sources take an endpoint");
  if (uri.starts_with("s3://")) {
    GRANARY_ASSIGN_OR_RETURN(S3OriginOptions options, s3OptionsOf(source));
    return makeS3Origin(std::move(options));
  }
  if (uri.starts_with("http://") || uri.starts_with("https://")) return makeHttp(source);
  if (uri.starts_with("file://")) {
    GRANARY_RETURN_IF_ERROR(unknownOptions(source, {}));
    const std::string path = uri.substr(7);
    if (!path.starts_with("/"))
      return invalidArgument("uri: file:// needs an absolute path, e.g. file:///mnt/data/");
    GRANARY_ASSIGN_OR_RETURN(const LocatedSource located, locateFileSource(source, settings));
    return makeFileOrigin(located.root, located.relative);
  }
  return invalidArgument("uri: \"" + uri.substr(0, uri.find(':')) +
                         "\" is not a supported scheme (s3://, http://, https://, file://)");
}

}  // namespace granary::cache
