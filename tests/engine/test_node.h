// One cache node's stores in a temporary directory, as the binary opens them, for tests.
#pragma once

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include "common/clock.h"
#include "engine/core/bandwidth_limiter.h"
#include "engine/dataset_cache.h"
#include "engine/store/chunk_store.h"
#include "engine/store/manifest_store.h"

namespace granary::cache::testing {

inline std::string randomBytes(size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string out(size, '\0');
  for (auto& c : out) c = static_cast<char>(random());
  return out;
}

// A tmpfs of `size` (e.g. "64m") mounted at `path` while it lives: a small disk to fill.
// mounted() is false, with error() saying why, where this process may not mount (not root).
class ScopedTmpfs {
 public:
  ScopedTmpfs(std::filesystem::path path, const std::string& size) : path_(std::move(path)) {
    std::filesystem::create_directories(path_);
    mounted_ = ::mount("tmpfs", path_.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~ScopedTmpfs() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  ScopedTmpfs(const ScopedTmpfs&) = delete;
  ScopedTmpfs& operator=(const ScopedTmpfs&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::filesystem::path path_;
  bool mounted_ = false;
  std::string error_;
};

// One cache node's stores, as the binary opens them.
struct TestNode {
  TestNode(const std::filesystem::path& under, std::string name, int64_t quota = 64 << 20,
           std::filesystem::path data = {})
      : root(under / name) {
    if (data.empty()) data = root / "data";
    manifests = std::move(*ManifestStore::open(this->root / "manifest"));
    chunks = std::move(*ChunkStore::open(this->root / "index", {{data, quota}}));
    context = std::make_unique<NodeContext>(
        NodeContext{name, *manifests, *chunks, limiter, realClock(), nullptr, nullptr});
  }
  std::filesystem::path root;
  std::unique_ptr<ManifestStore> manifests;
  std::unique_ptr<ChunkStore> chunks;
  BandwidthLimiter limiter{realClock(), 0};
  std::unique_ptr<NodeContext> context;
};

}  // namespace granary::cache::testing
