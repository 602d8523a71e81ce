// What a path in a dataset's manifest may be. Pure.
#pragma once

#include <string_view>

#include "common/result.h"

namespace granary::cache {

// Checks a manifest path: relative, '/'-separated, no empty, "." or ".." segments, no NUL.
// InvalidArgument naming the path otherwise.
Status validateManifestPath(std::string_view path);

}  // namespace granary::cache
