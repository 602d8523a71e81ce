// Two versions of a dataset's manifest compared file by file (engine/core/manifest_changes.h).
#pragma once

#include <stop_token>
#include <string>

#include "common/result.h"
#include "engine/core/manifest_changes.h"
#include "engine/store/manifest_store.h"

namespace granary::cache {

// Walks the files of generations `before` and `now` side by side, in key order, a batch of each
// at a time. Cancelled when `stop` is requested.
Result<ManifestChanges> compareVersions(const ManifestStore& manifests, const std::string& before,
                                        const std::string& now, std::stop_token stop);

}  // namespace granary::cache
