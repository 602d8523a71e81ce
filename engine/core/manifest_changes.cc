#include "engine/core/manifest_changes.h"

#include <utility>

namespace granary::cache {
namespace {

std::pair<std::string_view, std::string_view> parentAndName(std::string_view path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

std::strong_ordering manifestOrder(std::string_view a, std::string_view b) {
  return parentAndName(a) <=> parentAndName(b);
}

void countChange(ManifestChanges& changes, const ListedFile* before, const ListedFile* now) {
  if (now == nullptr) {
    if (before != nullptr) ++changes.removed;
    return;
  }
  if (before == nullptr) {
    ++changes.added;
    changes.addedBytes += now->size;
  } else if (before->size != now->size || before->version != now->version) {
    ++changes.changed;
    changes.changedBytes += now->size;
  } else {
    ++changes.unchanged;
  }
}

}  // namespace granary::cache
