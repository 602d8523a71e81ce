// Builds the origin for a dataset source from its URI: file://, http(s)://, s3:// or pvc://.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "cache-node/origin/origin.h"
#include "common/secret.h"

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
  // Where PersistentVolumeClaims are mounted on the node: pvc://claim/path reads
  // <pvcRoot>/claim/path. Empty: pvc:// sources are refused.
  std::filesystem::path pvcRoot;
};

// InvalidArgument naming the field (uri, endpoint, options.<name>) for a source that cannot be
// used; never echoes credentials.
Result<std::unique_ptr<Origin>> makeOrigin(const SourceSpec& source,
                                           const OriginSettings& settings = {});

}  // namespace granary::cache
