// Parts of an origin's key order, so that a listing in key order can be cut into parts listed
// side by side, and each part go on from where it stood when the listing was cut short. Pure.
#pragma once

#include <cstddef>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace granary::cache {

// The paths after `after` (exclusive; "" from the first) up to `through` (inclusive; "" to the
// last), in byte order.
struct KeyRange {
  std::string after;
  std::string through;

  bool contains(std::string_view path) const {
    return path > after && (through.empty() || path <= through);
  }
  friend bool operator==(const KeyRange&, const KeyRange&) = default;
  // As tests print it: (after, through].
  friend std::ostream& operator<<(std::ostream& out, const KeyRange& range) {
    return out << "(\"" << range.after << "\", \"" << range.through << "\"]";
  }
};

// At most `parts` ranges that cover the whole key order between them, cut at the source's
// top-level directories `directories` (sorted, each ending in '/') so that each holds about as
// many of them: a range through "d/" holds what sorts before "d/", and the next one starts
// inside "d/" (the key "d/" itself is a directory marker, no file). One range, the whole key
// order, where there are fewer than two directories or `parts` < 2.
std::vector<KeyRange> splitAtDirectories(const std::vector<std::string>& directories, size_t parts);

// `parts` (in key order) dealt out to at most `listers` nodes of a set: runs of consecutive
// parts, as even as can be, one run per lister while parts last (fewer runs than listers where
// there are fewer parts).
std::vector<std::vector<KeyRange>> shareParts(const std::vector<KeyRange>& parts, size_t listers);

// Whether `key` is in one of `ranges`.
bool inRanges(std::span<const KeyRange> ranges, std::string_view key);

}  // namespace granary::cache
