#include "tests/support/tree_files.h"

#include <fstream>
#include <iterator>
#include <random>

namespace granary::testing {

std::string randomBytes(size_t size, uint32_t seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

void writeFile(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::map<std::string, std::string> contentsOf(const std::filesystem::path& root,
                                              const std::string& skip) {
  std::map<std::string, std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const std::string path = entry.path().lexically_relative(root).generic_string();
    if (!skip.empty() && (path == skip || path.starts_with(skip + "/"))) continue;
    if (entry.is_regular_file() && !entry.is_symlink()) files[path] = readFile(entry.path());
  }
  return files;
}

}  // namespace granary::testing
