#include "common/origin_roots.h"

#include <algorithm>

namespace granary {
namespace {

std::vector<std::string_view> elementsOf(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    if (slash > start) out.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

std::string joined(const std::vector<std::string_view>& elements, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) (out += '/') += elements[i];
  return out;
}

Status badRoot(std::string_view text, std::string_view why) {
  return invalidArgument("\"" + std::string(text) + "\" " + std::string(why) +
                         "; write a root of namespaces, e.g. /srv/checkpoints/{namespace} (each "
                         "namespace only its own directory), or a shared root, e.g. "
                         "shared:/srv/datasets (every namespace all of it)");
}

std::string fixOf(std::string_view option) {
  return "cacheNode." + std::string(option) + " in the chart";
}

}  // namespace

bool isNamespaceName(std::string_view ns) {
  if (ns.empty() || ns.size() > 63 || ns.front() == '-' || ns.back() == '-') return false;
  return std::all_of(ns.begin(), ns.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string lexicallyNormal(std::string_view path) {
  const bool absolute = !path.empty() && path.front() == '/';
  std::vector<std::string_view> kept;
  for (std::string_view e : elementsOf(path)) {
    if (e == ".") continue;
    if (e == "..") {
      if (!kept.empty() && kept.back() != "..") {
        kept.pop_back();
      } else if (!absolute) {
        kept.push_back(e);
      }
      continue;
    }
    kept.push_back(e);
  }
  std::string out = joined(kept, 0, kept.size());
  if (absolute) return out.empty() ? "/" : out;
  return out.empty() ? "." : out.substr(1);
}

bool isPathWithin(std::string_view path, std::string_view root) {
  if (root == "/") return path.starts_with('/');
  return path.starts_with(root) && (path.size() == root.size() || path[root.size()] == '/');
}

std::string OriginRoot::directoryOf(std::string_view ns) const {
  if (shared) return before;
  return before + "/" + std::string(ns) + (after.empty() ? "" : "/" + after);
}

Result<OriginRoot> parseOriginRoot(std::string_view text) {
  OriginRoot root{.text = std::string(text)};
  std::string_view path = text;
  if (path.starts_with(kSharedRootPrefix)) {
    root.shared = true;
    path.remove_prefix(kSharedRootPrefix.size());
  }
  if (!path.starts_with('/')) return badRoot(text, "is not an absolute directory");
  const std::vector<std::string_view> elements = elementsOf(path);
  for (std::string_view e : elements)
    if (e == "." || e == "..") return badRoot(text, "has a \".\" or \"..\" element");
  size_t at = elements.size();
  for (size_t i = 0; i < elements.size(); ++i) {
    const bool whole = elements[i] == kNamespaceElement;
    if (!whole && elements[i].find(kNamespaceElement) != std::string_view::npos)
      return badRoot(text, "has {namespace} inside an element: it must be one whole element");
    if (!whole) continue;
    if (root.shared) return badRoot(text, "is shared and has a {namespace} element: not both");
    if (at != elements.size()) return badRoot(text, "has {namespace} twice");
    at = i;
  }
  if (root.shared) {
    if (elements.empty()) return badRoot(text, "shares the whole file system");
    root.before = joined(elements, 0, elements.size());
    return root;
  }
  if (at == elements.size())
    return badRoot(text, "says neither whose it is nor that every namespace shares it");
  if (at == 0)
    return badRoot(text, "puts {namespace} right below /, among the node's own directories");
  root.before = joined(elements, 0, at);
  root.after = joined(elements, at + 1, elements.size());
  if (!root.after.empty()) root.after.erase(0, 1);
  return root;
}

Result<std::vector<OriginRoot>> parseOriginRoots(const std::vector<std::string>& roots,
                                                 std::string_view option) {
  std::vector<OriginRoot> out;
  for (size_t i = 0; i < roots.size(); ++i) {
    auto root = parseOriginRoot(roots[i]);
    if (!root.isOk())
      return root.status().withContext(std::string(option) + "[" + std::to_string(i) + "]");
    out.push_back(std::move(*root));
  }
  return out;
}

Status noRootsError(std::string_view uri, std::string_view option) {
  const std::string o(option);
  return invalidArgument(
      "uri: " + std::string(uri) + " is refused: the cache node allows no file:// uris (its " + o +
      " is empty); add a root to " + o + " in the cache node's options (" + fixOf(option) + ")");
}

Status outsideRootsError(std::string_view uri, const std::vector<OriginRoot>& roots,
                         std::string_view option) {
  std::string list;
  for (const auto& root : roots) list += (list.empty() ? "" : ", ") + root.text;
  const std::string o(option);
  return invalidArgument("uri: " + std::string(uri) + " is outside the cache node's " + o + " (" +
                         list + "); add a root to " + o + " in the cache node's options (" +
                         fixOf(option) + ")");
}

Status otherNamespaceError(std::string_view uri, std::string_view ns, const OriginRoot& root,
                           std::string_view option) {
  const std::string o(option);
  return {StatusCode::kPermissionDenied,
          "uri: " + std::string(uri) + " is refused for namespace " + std::string(ns) +
              ": the cache node's " + o + " root " + root.text +
              " gives each namespace only its own directory, and " + std::string(ns) + "'s is " +
              root.directoryOf(ns) + "/; name a uri beneath it, or have the root " +
              "shared by every namespace (shared:" + root.before + " in " + fixOf(option) + ")"};
}

Status checkUnderRoots(std::string_view uri, std::string_view path, std::string_view ns,
                       const std::vector<OriginRoot>& roots, std::string_view option) {
  if (roots.empty()) return noRootsError(uri, option);
  const std::string normal = lexicallyNormal(path);
  const OriginRoot* other = nullptr;
  for (const auto& root : roots) {
    if ((root.shared || isNamespaceName(ns)) && isPathWithin(normal, root.directoryOf(ns)))
      return Status::ok();
    if (!root.shared && isPathWithin(normal, root.before)) other = &root;
  }
  if (other) return otherNamespaceError(uri, ns, *other, option);
  return outsideRootsError(uri, roots, option);
}

}  // namespace granary
