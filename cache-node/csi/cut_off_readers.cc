#include "cache-node/csi/cut_off_readers.h"

#include <algorithm>
#include <set>

namespace granary::cache {

void CutOffReaders::add(CutOffReader reader) {
  MutexLock lock(mutex_);
  for (const auto& known : readers_)
    if (known.podUid == reader.podUid && known.dataset == reader.dataset) return;
  readers_.push_back(std::move(reader));
  exportLocked(readers_.back().dataset);
}

void CutOffReaders::endPod(const std::string& podUid) {
  MutexLock lock(mutex_);
  std::set<std::string> datasets;
  std::erase_if(readers_, [&](const CutOffReader& reader) {
    if (reader.podUid != podUid) return false;
    datasets.insert(reader.dataset);
    return true;
  });
  for (const auto& dataset : datasets) exportLocked(dataset);
}

std::vector<CutOffReader> CutOffReaders::of(const std::string& dataset) const {
  MutexLock lock(mutex_);
  std::vector<CutOffReader> out;
  for (const auto& reader : readers_)
    if (reader.dataset == dataset) out.push_back(reader);
  return out;
}

void CutOffReaders::exportLocked(const std::string& dataset) {
  if (!metrics_) return;
  const auto count = std::count_if(readers_.begin(), readers_.end(),
                                   [&](const CutOffReader& r) { return r.dataset == dataset; });
  metrics_->cutOffReaders.with({dataset}).set(static_cast<double>(count));
}

}  // namespace granary::cache
