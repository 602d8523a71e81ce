#include "scheduler/core/dataset_fullness.h"

#include <algorithm>

namespace granary::scheduler {

DatasetFullness DatasetFullness::of(const std::vector<NodeInfo>& nodes) {
  DatasetFullness fullness;
  for (const auto& node : nodes) fullness.add(node);
  return fullness;
}

namespace {

// Whether readers in general can use the node: ready, schedulable, no taint that keeps pods off.
bool openToReaders(const NodeInfo& node) {
  return node.ready && !node.unschedulable &&
         std::none_of(node.taints.begin(), node.taints.end(), [](const Taint& taint) {
           return taint.effect == "NoSchedule" || taint.effect == "NoExecute";
         });
}

}  // namespace

void DatasetFullness::count(const NodeInfo& node, int sign) {
  const int64_t allocatable = node.allocatable.gpus();
  if (allocatable <= 0 || !openToReaders(node)) return;
  const int64_t requested = std::min(node.requested.gpus(), allocatable);
  for (const auto& dataset : node.cachedDatasets) {
    Gpus& gpus = byDataset_[dataset];
    gpus.requested += sign * requested;
    gpus.allocatable += sign * allocatable;
    if (gpus.allocatable == 0) byDataset_.erase(dataset);
  }
}

double DatasetFullness::at(const std::string& dataset) const {
  const auto it = byDataset_.find(dataset);
  if (it == byDataset_.end() || it->second.allocatable <= 0) return 0;
  return static_cast<double>(it->second.requested) / static_cast<double>(it->second.allocatable);
}

}  // namespace granary::scheduler
