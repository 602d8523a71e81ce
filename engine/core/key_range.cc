#include "engine/core/key_range.h"

#include <algorithm>

namespace granary::cache {

std::vector<KeyRange> splitAtDirectories(const std::vector<std::string>& directories,
                                         size_t parts) {
  parts = std::min(parts, directories.size());
  std::vector<KeyRange> ranges;
  std::string after;
  for (size_t i = 1; i < parts; ++i) {
    // The first directory of part i ends part i - 1: its key sorts after every file of the
    // directories before it, and before every file under it.
    const std::string& cut = directories[i * directories.size() / parts];
    if (cut <= after) continue;
    ranges.push_back({.after = after, .through = cut});
    after = cut;
  }
  ranges.push_back({.after = after, .through = ""});
  return ranges;
}

}  // namespace granary::cache
