#include "engine/core/cached_files.h"

namespace granary::cache {

void CachedFiles::added(const std::string& path, int64_t chunks) {
  Count& count = files_[path];
  count.chunks = chunks;
  if (++count.onDisk == count.chunks) ++complete_;
}

void CachedFiles::removed(const std::string& path) {
  const auto it = files_.find(path);
  if (it == files_.end()) return;
  if (it->second.onDisk == it->second.chunks) --complete_;
  if (--it->second.onDisk == 0) files_.erase(it);
}

}  // namespace granary::cache
