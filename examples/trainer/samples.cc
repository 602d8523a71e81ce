// Listing, shuffling and sharding the trainer's samples.
#include "examples/trainer/samples.h"

#include <algorithm>
#include <system_error>

namespace granary::trainer {
namespace {

// SplitMix64 (Steele, Lea and Flood): a small PRNG whose output is fixed by its definition.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound), bound ≥ 1, without modulo bias (rejects the short last range).
  uint64_t below(uint64_t bound) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t value = next();
    while (value >= limit) value = next();
    return value % bound;
  }

 private:
  uint64_t state_;
};

// Fisher–Yates with the generator above: the same permutation on every rank and every build.
void shuffleInPlace(std::vector<std::filesystem::path>& items, uint64_t seed, int epoch) {
  SplitMix64 mixer(static_cast<uint64_t>(epoch));
  SplitMix64 random(seed ^ mixer.next());
  for (size_t i = items.size(); i > 1; --i) {
    std::swap(items[i - 1], items[random.below(i)]);
  }
}

Status checkIsDirectory(const std::filesystem::path& directory) {
  std::error_code error;
  const auto status = std::filesystem::status(directory, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    return invalidArgument(directory.string() + " does not exist");
  }
  if (error) return unavailable("cannot read " + directory.string() + ": " + error.message());
  if (status.type() != std::filesystem::file_type::directory) {
    return invalidArgument(directory.string() + " is not a directory");
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<std::filesystem::path>> listSamples(const std::filesystem::path& directory) {
  GRANARY_RETURN_IF_ERROR(checkIsDirectory(directory));
  std::vector<std::filesystem::path> samples;
  std::error_code error;
  for (std::filesystem::recursive_directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code typeError;  // a file that vanished while listing is not a sample
    if (it->is_regular_file(typeError)) samples.push_back(it->path());
  }
  if (error) return unavailable("cannot list " + directory.string() + ": " + error.message());
  if (samples.empty()) {
    return invalidArgument(directory.string() + " holds no files; point it at a dataset directory");
  }
  std::sort(samples.begin(), samples.end());
  return samples;
}

std::vector<std::filesystem::path> epochShard(const std::vector<std::filesystem::path>& samples,
                                              uint64_t seed, int epoch, const RankOf& rank) {
  std::vector<std::filesystem::path> order = samples;
  shuffleInPlace(order, seed, epoch);
  std::vector<std::filesystem::path> shard;
  shard.reserve(order.size() / static_cast<size_t>(rank.worldSize) + 1);
  for (size_t i = static_cast<size_t>(rank.rank); i < order.size();
       i += static_cast<size_t>(rank.worldSize)) {
    shard.push_back(std::move(order[i]));
  }
  return shard;
}

}  // namespace granary::trainer
