// Eviction under per-epoch shuffled reads, the access pattern of training: a dataset of
// `chunks` chunks read in a new random order every epoch, through a cache holding half of
// them. Prints the hit ratio of the epochs after the first (the first is all misses), for Pin
// (granary's default) and LRU side by side.
// Usage: cache_bench [chunks] [epochs] (defaults 100000 5).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/flags.h"
#include "engine/core/eviction.h"

namespace {

double steadyHitRatio(granary::cache::EvictionPolicy& policy, int chunks, int epochs) {
  std::vector<int> order(static_cast<size_t>(chunks));
  for (int i = 0; i < chunks; ++i) order[static_cast<size_t>(i)] = i;
  std::vector<char> cached(static_cast<size_t>(chunks), 0);
  std::vector<std::string> evict;
  std::mt19937 shuffle(2026);
  int64_t hits = 0, reads = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), shuffle);
    for (int chunk : order) {
      const std::string id = std::to_string(chunk);
      const bool hit = cached[static_cast<size_t>(chunk)] != 0;
      if (epoch > 0) {
        ++reads;
        hits += hit;
      }
      if (hit) {
        policy.touch(id);
      } else if (policy.admit(id, 1, evict)) {
        for (const auto& victim : evict) cached[static_cast<size_t>(std::stoi(victim))] = 0;
        cached[static_cast<size_t>(chunk)] = 1;
      }
    }
  }
  return reads ? static_cast<double>(hits) / static_cast<double>(reads) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  int chunks = 100000;
  int epochs = 5;
  CLI::App app("Hit ratio of Pin and LRU over shuffled epochs, cache = 50 % of the chunks.",
               "cache_bench");
  app.add_option("chunks", chunks, "chunks in the dataset")
      ->capture_default_str()
      ->check(CLI::Range(2, 100'000'000));
  app.add_option("epochs", epochs, "shuffled epochs, the first excluded from the ratio")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  if (auto code = granary::parseCommandLine(app, argc, argv)) return *code;
  auto pin = granary::cache::makePinPolicy(chunks / 2);
  auto lru = granary::cache::makeLruPolicy(chunks / 2);
  std::printf(
      "granary cache_bench: %d chunks, cache = 50 %%, %d shuffled epochs (first excluded)\n\n",
      chunks, epochs);
  std::printf("hit ratio\n");
  std::printf("  Pin (granary default)  %6.3f\n", steadyHitRatio(*pin, chunks, epochs));
  std::printf("  LRU (baseline)         %6.3f\n", steadyHitRatio(*lru, chunks, epochs));
  return 0;
}
