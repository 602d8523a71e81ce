#include "engine/core/placement.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>

namespace granary::cache {

uint64_t rendezvousWeight(std::string_view node, std::string_view path) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, node.data(), node.size());
  const char separator = '\0';  // "ab"+"c" and "a"+"bc" must differ
  XXH3_64bits_update(&state, &separator, 1);
  XXH3_64bits_update(&state, path.data(), path.size());
  return XXH3_64bits_digest(&state);
}

namespace {

struct Ranked {
  uint64_t weight;
  const std::string* node;
  bool operator>(const Ranked& other) const {
    return weight != other.weight ? weight > other.weight : *node < *other.node;
  }
};

}  // namespace

std::vector<std::string> ownersOf(std::string_view path, std::span<const std::string> nodes,
                                  int replicas) {
  std::vector<Ranked> ranked;
  ranked.reserve(nodes.size());
  for (const auto& node : nodes) ranked.push_back({rendezvousWeight(node, path), &node});
  const size_t count = std::min(ranked.size(), static_cast<size_t>(std::max(replicas, 0)));
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<long>(count), ranked.end(),
                    std::greater<>());
  std::vector<std::string> owners;
  owners.reserve(count);
  for (size_t i = 0; i < count; ++i) owners.push_back(*ranked[i].node);
  return owners;
}

bool owns(std::string_view node, std::string_view path, std::span<const std::string> nodes,
          int replicas) {
  const Ranked mine{rendezvousWeight(node, path), nullptr};
  const std::string self(node);
  int higher = 0;
  for (const auto& other : nodes) {
    if (other == node) continue;
    const uint64_t weight = rendezvousWeight(other, path);
    if (weight > mine.weight || (weight == mine.weight && other < self)) {
      if (++higher >= replicas) return false;
    }
  }
  return replicas > 0 && std::find(nodes.begin(), nodes.end(), self) != nodes.end();
}

}  // namespace granary::cache
