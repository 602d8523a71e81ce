// Files of a test's directory trees: written with random bytes, read back whole, and every regular
// file below a root with its bytes (a checkpoint tree, an origin), to compare byte for byte.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace granary::testing {

// `size` bytes drawn from a generator seeded with `seed`.
std::string randomBytes(size_t size, uint32_t seed);
// Replaces `path` with `bytes`, creating its directories.
void writeFile(const std::filesystem::path& path, const std::string& bytes);
// The whole file; "" when it cannot be read.
std::string readFile(const std::filesystem::path& path);
// Every regular file below `root` (relative, '/'-separated) with its bytes; symbolic links and
// what lies below a top-level directory named `skip` are left out.
std::map<std::string, std::string> contentsOf(const std::filesystem::path& root,
                                              const std::string& skip = "");

}  // namespace granary::testing
