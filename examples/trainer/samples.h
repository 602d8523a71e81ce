// The trainer's dataset: which files are samples, and which of them one rank reads in an epoch.
// listSamples reads the file system; the rest is pure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "common/result.h"

namespace granary::trainer {

// Every regular file under `directory`, recursively (symbolic links to files count; links to
// directories are not followed), sorted by path. InvalidArgument when `directory` is missing,
// is not a directory or holds no file; Unavailable when part of it cannot be listed.
Result<std::vector<std::filesystem::path>> listSamples(const std::filesystem::path& directory);

// Which rank of how many this process is (RANK and WORLD_SIZE, as torchrun sets them).
struct RankOf {
  int rank = 0;       // 0 ≤ rank < worldSize
  int worldSize = 1;  // ≥ 1
};

// The samples `rank` reads in `epoch` (1-based): all of `samples`, shuffled by a PRNG seeded
// with (seed, epoch), then every position i with i % worldSize == rank, in shuffled order.
// Every rank computes the same permutation, so across ranks each sample is read exactly once
// per epoch. The permutation is fixed by this code alone (not by the standard library's), so
// ranks built by different compilers agree.
std::vector<std::filesystem::path> epochShard(const std::vector<std::filesystem::path>& samples,
                                              uint64_t seed, int epoch, const RankOf& rank);

}  // namespace granary::trainer
