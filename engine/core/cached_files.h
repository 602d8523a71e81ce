// Which files of a dataset have every chunk on this node's disks, kept as chunks come and go
// (fetched, evicted, found damaged), so that what the node reports as cached is what is on
// disk. Pure; not thread-safe: one owner per dataset.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace granary::cache {

class CachedFiles {
 public:
  // A chunk of `path`, a file of `chunks` chunks, is now on disk.
  void added(const std::string& path, int64_t chunks);
  // A chunk of `path` left the disk.
  void removed(const std::string& path);
  // Files with every chunk on disk.
  int64_t complete() const { return complete_; }

 private:
  struct Count {
    int64_t onDisk = 0, chunks = 0;
  };
  std::unordered_map<std::string, Count> files_;  // files with a chunk on disk
  int64_t complete_ = 0;
};

}  // namespace granary::cache
