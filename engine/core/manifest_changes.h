// What a refresh found: a new listing of a dataset's origins against the version it serves,
// file by file, matched by path and told apart by size and origin version (the ETag, or where the
// origin gives none, what stands for it: size and mtime for file://, Last-Modified or the size for
// http(s)://). Pure.
#pragma once

#include <compare>
#include <cstdint>
#include <string_view>

namespace granary::cache {

// A listed file, as the comparison sees it.
struct ListedFile {
  std::string_view path;
  int64_t size = 0;
  std::string_view version;
};

struct ManifestChanges {
  int64_t added = 0;
  int64_t changed = 0;
  int64_t removed = 0;
  int64_t unchanged = 0;
  int64_t addedBytes = 0;    // of the files added
  int64_t changedBytes = 0;  // of the files changed, as listed now

  bool any() const { return added + changed + removed > 0; }
  friend bool operator==(const ManifestChanges&, const ManifestChanges&) = default;
};

// The order of the manifest's keys: by parent directory, then by name, so that a directory's
// children come together (not the order of the paths as strings: "a/b/c" comes after "a/d").
std::strong_ordering manifestOrder(std::string_view a, std::string_view b);

// Counts one step of a walk of both listings in manifestOrder: a file only the old one has
// (`now` null), only the new one (`before` null), or both.
void countChange(ManifestChanges& changes, const ListedFile* before, const ListedFile* now);

}  // namespace granary::cache
