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

std::vector<std::vector<KeyRange>> shareParts(const std::vector<KeyRange>& parts, size_t listers) {
  const size_t shares = std::min(listers, parts.size());
  std::vector<std::vector<KeyRange>> dealt(shares);
  for (size_t i = 0; i < parts.size(); ++i) dealt[i * shares / parts.size()].push_back(parts[i]);
  return dealt;
}

bool inRanges(std::span<const KeyRange> ranges, std::string_view key) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [&](const KeyRange& range) { return range.contains(key); });
}

}  // namespace granary::cache
