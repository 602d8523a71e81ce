#include "tests/support/scratch_tree.h"

#include <sys/mount.h>

#include <fstream>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

namespace granary::testing {

void removeTree(const std::filesystem::path& root) {
  if (root.empty()) return;
  const std::string top = root.lexically_normal().string();
  // /proc/self/mounts lists mounts in the order they were made: later ones are deeper or on top.
  std::vector<std::string> under;
  std::ifstream mounts("/proc/self/mounts");
  for (std::string device, point, rest; mounts >> device >> point && std::getline(mounts, rest);)
    if (point == top || point.starts_with(top + "/")) under.push_back(point);
  for (auto it = under.rbegin(); it != under.rend(); ++it) ::umount2(it->c_str(), MNT_DETACH);
  std::error_code error;
  std::filesystem::remove_all(root, error);
  if (error) std::cerr << "cannot remove " << top << ": " << error.message() << "\n";
}

}  // namespace granary::testing
