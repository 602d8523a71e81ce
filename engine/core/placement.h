// Which cache nodes own a file: rendezvous (highest-random-weight) hashing of the path over
// the dataset's node set; the `replicas` nodes with the highest weights own it. Every node
// computes the same answer on its own, so no coordinator is needed; when a node joins or
// leaves, only the files it gains or loses move. Pure.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace granary::cache {

// The weight of `node` for `path`: XXH3-64 of node, a separator, and path.
uint64_t rendezvousWeight(std::string_view node, std::string_view path);

// The owners of `path`, highest weight first: min(replicas, nodes.size()) distinct nodes.
// Ties (equal weights) break by node name, so every caller agrees.
std::vector<std::string> ownersOf(std::string_view path, std::span<const std::string> nodes,
                                  int replicas);

// Whether `node` is among the owners of `path` (without building the owner list).
bool owns(std::string_view node, std::string_view path, std::span<const std::string> nodes,
          int replicas);

}  // namespace granary::cache
