// Builds the origin for a dataset source from its URI: file://, http(s):// or s3://.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/origin_roots.h"
#include "common/secret.h"
#include "engine/origin/origin.h"
#include "engine/origin/s3_origin.h"

namespace granary::cache {

// A source as a Dataset names it, with the credentials its Secret holds (in memory only).
struct SourceSpec {
  std::string uri;
  // The namespace whose source it is (a Dataset's, a checkpoint volume's pod's): a file:// uri
  // may lie only in its own directory of a root of namespaces (OriginSettings::namespaceRoots).
  // "" where none applies (local mode): such a source has no directory there.
  std::string ns;
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
  // These roots are shared by every namespace (on a cluster node, the "shared:" roots of its
  // options, common/origin_roots.h).
  std::vector<std::filesystem::path> fileOriginRoots;
  // Roots of namespaces ("/srv/ckpt/{namespace}"): a source of namespace N may use only the
  // directory N's name gives it beneath each (which need not exist yet), and no symlink or ".."
  // may lead from it into another's; reads stay beneath it. Refusals are PermissionDenied.
  std::vector<OriginRoot> namespaceRoots;
  // The cache node's option that holds those roots, as errors name it in their fix (the chart's
  // value is cacheNode.<it>): fileOriginRoots for reading, checkpointOriginRoots for writing.
  std::string rootsOption = "fileOriginRoots";
};

// InvalidArgument naming the field (uri, endpoint, options.<name>) for a source that cannot be
// used, and the setting to change for a file:// source outside its roots; PermissionDenied for
// a file:// source in another namespace's directory of a root of namespaces (locateFileSource);
// never echoes credentials.
Result<std::unique_ptr<Origin>> makeOrigin(const SourceSpec& source,
                                           const OriginSettings& settings = {});

// Where a file:// source lies beneath the node's roots, symlinks and ".." resolved (as
// std::filesystem::weakly_canonical: what does not exist yet is taken as written).
struct LocatedSource {
  std::filesystem::path root;      // the directory its origin stays beneath: a shared root, or
                                   // the source's namespace's directory of a root of namespaces
  std::filesystem::path relative;  // below root, lexically normal; "" for root itself
  // The existing directory `root` is made from, and the elements from it down to root ("" for a
  // shared root; the namespace's name and what follows {namespace} for a root of namespaces), which
  // a writer creates, never following a symlink, when missing.
  std::filesystem::path above;
  std::filesystem::path fromAbove;
};
// The innermost root that holds the source's path (the uri without "file://", absolute). Errors,
// as common/origin_roots.h's checkUnderRoots says them (with settings.rootsOption):
// InvalidArgument when no root holds it or the node has none, PermissionDenied when a root of
// namespaces holds it outside the source's namespace's directory (another's, or above them).
Result<LocatedSource> locateFileSource(const SourceSpec& source, const OriginSettings& settings);

// The options of an s3:// source (its uri, endpoint, region, options.addressing, credentials).
// InvalidArgument naming the field.
Result<S3OriginOptions> s3OptionsOf(const SourceSpec& source);

}  // namespace granary::cache
