// Builds the origin for a dataset source from its URI: file://, http(s):// or s3://.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/secret.h"
#include "engine/origin/origin.h"
#include "engine/origin/s3_origin.h"

namespace granary::cache {

// A source as a Dataset names it, with the credentials its Secret holds (in memory only).
struct SourceSpec {
  std::string uri;
  std::string endpoint;  // s3 only
  std::string region;    // s3 only
  std::map<std::string, std::string> options;
  Secret accessKeyId;
  Secret secretAccessKey;
  Secret sessionToken;
  Secret bearerToken;  // http(s)
};

struct OriginSettings {
  // The directories file:// sources may read, absolute. A source must lie within one of them
  // once symlinks and ".." are resolved, and reads stay beneath that root (engine/origin/
  // beneath.h). Empty (a cluster's default): file:// sources are refused, since whoever may
  // create a Dataset could otherwise serve any directory the node sees into their pods. Local
  // mode allows the directories of the Datasets named on its command line.
  std::vector<std::filesystem::path> fileOriginRoots;
  // The cache node's option that holds those roots, as errors name it in their fix (the chart's
  // value is cacheNode.<it>): fileOriginRoots for reading, checkpointOriginRoots for writing.
  std::string rootsOption = "fileOriginRoots";
};

// InvalidArgument naming the field (uri, endpoint, options.<name>) for a source that cannot be
// used, and the setting to change for a file:// source outside its roots; never echoes
// credentials.
Result<std::unique_ptr<Origin>> makeOrigin(const SourceSpec& source,
                                           const OriginSettings& settings = {});

// The options of an s3:// source (its uri, endpoint, region, options.addressing, credentials).
// InvalidArgument naming the field.
Result<S3OriginOptions> s3OptionsOf(const SourceSpec& source);

}  // namespace granary::cache
