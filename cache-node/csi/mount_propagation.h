// Whether mounts made on a directory propagate (the mount holding it is shared). A container's
// volume with mountPropagation: Bidirectional carries the node's mounts to the host and to the
// pods only when the host's mount under it is shared; on a private one the CSI bind mounts stay
// inside the node's container, and a pod's volume is an empty directory.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace granary::cache {

struct MountOfPath {
  std::string point;    // the mount point of the mount that holds the path
  bool shared = false;  // its propagation is shared (mountinfo's "shared:N")
};

// The mount that holds `path` (absolute, normalized) in `mountinfo`, /proc/PID/mountinfo's
// text: the one with the longest mount point that contains the path, the latest of equals.
// InvalidArgument when no line parses or none holds the path.
Result<MountOfPath> mountHolding(const std::filesystem::path& path, std::string_view mountinfo);

// Checks each directory against this process's /proc/self/mountinfo. OK when every one is on a
// shared mount; FailedPrecondition naming each that is not, its mount and the fix.
Status checkSharedMounts(const std::vector<std::string>& directories);

}  // namespace granary::cache
