#include "cache-node/ensured_record.h"

#include <algorithm>

namespace granary::cache {

namespace {

std::string labelOf(const v1::DatasetRef& ref) { return ref.namespace_() + "/" + ref.name(); }

}  // namespace

void EnsuredRecord::ensured(const v1::EnsureDatasetRequest& request) {
  std::pair key{labelOf(request.dataset()), request.dataset().generation()};
  std::string bytes = request.SerializeAsString();
  MutexLock lock(mutex_);
  for (auto& [existing, held] : requests_) {
    if (existing == key) {
      held = std::move(bytes);
      return;
    }
  }
  requests_.emplace_back(std::move(key), std::move(bytes));
}

void EnsuredRecord::purged(const v1::DatasetRef& dataset, bool allGenerations) {
  const std::string label = labelOf(dataset);
  MutexLock lock(mutex_);
  std::erase_if(requests_, [&](const auto& entry) {
    return entry.first.first == label &&
           (allGenerations || entry.first.second == dataset.generation());
  });
}

std::vector<std::string> EnsuredRecord::serialized() const {
  MutexLock lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [_, bytes] : requests_) out.push_back(bytes);
  return out;
}

}  // namespace granary::cache
