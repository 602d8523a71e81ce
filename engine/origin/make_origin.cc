#include "engine/origin/make_origin.h"

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
    const std::string& option = settings.rootsOption;
    const std::string fix = "; add a root to " + option +
                            " in the cache node's options (cacheNode." + option + " in the chart)";
    if (settings.fileOriginRoots.empty()) {
      return invalidArgument("uri: " + uri +
                             " is refused: the cache node allows no file:// sources (its " +
                             option + " is empty)" + fix);
    }
    const auto located = locateBeneath(path, settings.fileOriginRoots);
    if (!located) {
      std::string roots;
      for (const auto& root : settings.fileOriginRoots)
        roots += (roots.empty() ? "" : ", ") + root.string();
      return invalidArgument("uri: " + uri + " is outside the cache node's " + option + " (" +
                             roots + ")" + fix);
    }
    return makeFileOrigin(located->root, located->relative);
  }
  return invalidArgument("uri: \"" + uri.substr(0, uri.find(':')) +
                         "\" is not a supported scheme (s3://, http://, https://, file://)");
}

}  // namespace granary::cache
