// The drain's record on the node's disk: every path the origin holds and the identity of the
// local file it was uploaded from (or restored to), so that a restarted drain uploads nothing
// twice and carries out the removals it had not. One line a path, written whole (a new file
// renamed over the old) after each step the origin confirmed.
#pragma once

#include <filesystem>
#include <vector>

#include "common/result.h"
#include "engine/checkpoint/tree_journal.h"

namespace granary::checkpoint {

// Empty when there is no record yet. Corruption naming the line when one does not parse.
Result<std::vector<OriginEntry>> readDrainRecord(const std::filesystem::path& file);

Status writeDrainRecord(const std::filesystem::path& file, const std::vector<OriginEntry>& entries);

}  // namespace granary::checkpoint
