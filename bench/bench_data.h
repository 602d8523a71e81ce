// Data and measuring helpers the cache benchmarks share: datasets of random files kept between
// runs, a quiet disk and page cache before each measurement.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/flags.h"

namespace granary::bench {

using Clock_ = std::chrono::steady_clock;
namespace fs = std::filesystem;

inline double seconds(Clock_::time_point since) {
  return std::chrono::duration<double>(Clock_::now() - since).count();
}
inline double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

// The data the cache benchmarks share: its scale, its folder (reused between runs) and the
// throttle of the web server serving it.
struct DataArgs {
  double scale = 1.0;
  int64_t throttle = 200LL << 20;
  fs::path dir = "/var/tmp/granary-bench";
};

// --scale, --throttle-mib and --dir.
inline void addDataFlags(CLI::App& app, DataArgs& args) {
  app.add_option("--scale", args.scale, "shrinks the file counts and sizes (0.01: a quick look)")
      ->capture_default_str()
      ->check(CLI::Range(0.0001, 100.0));
  app.add_option_function<int64_t>(
         "--throttle-mib", [&args](int64_t mib) { args.throttle = mib << 20; },
         "the origin's bandwidth in MiB/s, shared by all connections (default: 200)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--dir", args.dir,
                 "where the data lives, reused between runs (default: /var/tmp/granary-bench)");
}

// Writes `count` files of `size` random bytes under root/name (kept between runs) and a JSON
// index the http origin lists from.
inline int64_t makeDataset(const fs::path& root, const std::string& name, int count, int64_t size) {
  const fs::path dir = root / name;
  const fs::path done = root / (name + ".done");
  if (!fs::exists(done)) {
    fs::remove_all(dir);
    std::mt19937_64 random(42);
    std::string block(static_cast<size_t>(std::min<int64_t>(size, 1 << 20)), '\0');
    std::string index = "{\"files\":[";
    for (int i = 0; i < count; ++i) {
      const std::string rel = "d" + std::to_string(i % 100) + "/f" + std::to_string(i) + ".bin";
      fs::create_directories((dir / rel).parent_path());
      std::ofstream out(dir / rel, std::ios::binary);
      for (int64_t written = 0; written < size;) {
        for (size_t w = 0; w < block.size(); w += 8) {
          const uint64_t v = random();
          std::memcpy(block.data() + w, &v, std::min<size_t>(8, block.size() - w));
        }
        const int64_t n = std::min<int64_t>(static_cast<int64_t>(block.size()), size - written);
        out.write(block.data(), n);
        written += n;
      }
      out.close();
      index += std::string(i ? "," : "") + "{\"path\":\"" + rel +
               "\",\"size\":" + std::to_string(size) + "}";
    }
    index += "]}";
    std::ofstream(dir / "index.json") << index;
    std::ofstream(done) << "ok";
  }
  return static_cast<int64_t>(count) * size;
}

// The dataset's files under `dir`, relative to it and sorted; its JSON indexes left out.
inline std::vector<std::string> filesUnder(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() != ".json")
      files.push_back(fs::relative(e.path(), dir).string());
  std::sort(files.begin(), files.end());
  return files;
}

// Drops the page cache and, unless `keepNames`, the kernel's cached directory entries and
// inodes too.
inline void dropPageCache(bool keepNames = false) {
  ::sync();
  std::ofstream("/proc/sys/vm/drop_caches") << (keepNames ? "1" : "3");
}

// A quiet disk and an empty page cache, then the origin's files read once so the origin serves
// them from memory: a real origin's disks are not the cache node's, so only the cache's writes
// should meet this disk.
inline void quietDiskWarmOrigin(const fs::path& origin) {
  dropPageCache();
  std::vector<char> buffer(1 << 20);
  for (const auto& e : fs::recursive_directory_iterator(origin)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()))) {
    }
  }
}

}  // namespace granary::bench
