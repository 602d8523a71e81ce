// Removing a test's scratch tree, whatever a killed process left mounted in it.
#pragma once

#include <filesystem>

namespace granary::testing {

// Detaches (lazily, MNT_DETACH) every mount at or below `root`, deepest first, then removes the
// tree. A FUSE mount whose daemon was killed answers "Transport endpoint is not connected" to
// every call, which std::filesystem::remove_all throws on; detached first, it is an empty
// directory again. Never throws: what cannot be removed is printed to stderr and left.
void removeTree(const std::filesystem::path& root);

}  // namespace granary::testing
