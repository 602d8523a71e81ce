#include "engine/core/manifest_path.h"

#include <string>

namespace granary::cache {

Status validateManifestPath(std::string_view path) {
  if (path.empty()) return invalidArgument("manifest path is empty");
  if (path.front() == '/')
    return invalidArgument("manifest path \"" + std::string(path) + "\" must be relative");
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const std::string_view segment = path.substr(start, slash - start);
    if (segment.empty() || segment == "." || segment == ".." ||
        segment.find('\0') != std::string_view::npos) {
      return invalidArgument("manifest path \"" + std::string(path) +
                             "\" has an empty, \".\", \"..\" or NUL segment");
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return Status::ok();
}

}  // namespace granary::cache
