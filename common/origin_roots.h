// The roots of file:// origins a cache node allows (its options fileOriginRoots, read by Datasets,
// and checkpointOriginRoots, written by TrainingJobs' checkpoints), and whose a uri beneath one
// is. Both the cache node (which also resolves symlinks, engine/origin/beneath.h) and the operator
// (which says in a TrainingJob's status what the nodes will refuse) read them. Pure.
//
// A root has one of two forms, and a bare directory is neither (so that sharing is always said):
//
//   "/srv/ckpt/{namespace}"  a root of namespaces: namespace team-a may use only /srv/ckpt/team-a
//                            and what lies beneath it. {namespace} is one whole path element,
//                            after at least one other; elements may follow it
//                            ("/home/{namespace}/checkpoints").
//   "shared:/srv/datasets"   a root shared by every namespace: any namespace may use any
//                            directory beneath /srv/datasets.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace granary {

inline constexpr std::string_view kSharedRootPrefix = "shared:";
inline constexpr std::string_view kNamespaceElement = "{namespace}";

struct OriginRoot {
  std::string text;  // as the options name it, as errors quote it
  bool shared = false;
  std::string before;  // absolute, lexically normal, no trailing '/': the shared root, or the
                       // elements before {namespace}
  std::string after;   // a root of namespaces: the elements after {namespace} ("" or "a/b")

  // The directory namespace `ns` may use: `before` for a shared root, before/ns[/after] for a
  // root of namespaces (lexical: the node checks that no symlink leads elsewhere).
  std::string directoryOf(std::string_view ns) const;
};

// InvalidArgument saying what is wrong and showing both forms, e.g. for a bare directory, a
// relative path, "/", "/{namespace}", "{namespace}" inside an element or twice, "." or "..".
Result<OriginRoot> parseOriginRoot(std::string_view text);
// Each of `roots`, the first error prefixed with "<option>[i]: ".
Result<std::vector<OriginRoot>> parseOriginRoots(const std::vector<std::string>& roots,
                                                 std::string_view option);

// Whether namespace `ns` may use the file:// directory `path` (absolute; compared by its lexical
// form, "." and ".." folded) beneath one of `roots`, the cache node's option `option`
// (fileOriginRoots or checkpointOriginRoots). `uri` is how errors name it. OK when a shared root
// or ns's directory of a root of namespaces holds it; otherwise
//   - PermissionDenied naming the uri, the namespace, the root and the namespace's directory, when
//     a root of namespaces holds it in another namespace's directory (or above them);
//   - InvalidArgument naming the uri, the option and its roots, when no root holds it or there is
//     none.
// Both messages start "uri: " and end with the fix (cacheNode.<option> in the chart).
Status checkUnderRoots(std::string_view uri, std::string_view path, std::string_view ns,
                       const std::vector<OriginRoot>& roots, std::string_view option);

// The errors checkUnderRoots returns, for a caller that compares paths its own way (the cache
// node, after resolving symlinks).
Status noRootsError(std::string_view uri, std::string_view option);
Status outsideRootsError(std::string_view uri, const std::vector<OriginRoot>& roots,
                         std::string_view option);
Status otherNamespaceError(std::string_view uri, std::string_view ns, const OriginRoot& root,
                           std::string_view option);

// Whether `ns` is a namespace's name (a DNS label: a-z, 0-9 and '-', 1 to 63): only such a name
// has a directory in a root of namespaces.
bool isNamespaceName(std::string_view ns);
// True when `path` is `root` or lies below it, comparing whole '/'-separated elements of two
// absolute, lexically normal paths ("/data2" is not below "/data").
bool isPathWithin(std::string_view path, std::string_view root);
// `path` with "." and ".." folded and repeated '/' dropped; absolute stays absolute, ".." above
// "/" stays at "/". No trailing '/' (but "/" itself).
std::string lexicallyNormal(std::string_view path);

}  // namespace granary
