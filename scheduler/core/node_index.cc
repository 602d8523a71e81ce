#include "scheduler/core/node_index.h"

namespace granary::scheduler {

void FreeGpuIndex::update(size_t position, const NodeInfo& node) {
  erase(position);
  if (filed_.size() <= position) filed_.resize(position + 1);
  const Filed filed{.caching = !node.cachedDatasets.empty(),
                    .free = node.allocatable.gpus() - node.requested.gpus(),
                    .present = true};
  (filed.caching ? caching_ : plain_).insert({filed.free, position});
  filed_[position] = filed;
}

void FreeGpuIndex::erase(size_t position) {
  if (position >= filed_.size() || !filed_[position].present) return;
  const Filed& filed = filed_[position];
  (filed.caching ? caching_ : plain_).erase({filed.free, position});
  filed_[position] = {};
}

void FreeGpuIndex::forEachFitting(int64_t gpus, const std::function<bool(size_t)>& visit) const {
  for (const auto* set : {&plain_, &caching_}) {
    for (auto it = set->lower_bound({gpus, 0}); it != set->end(); ++it)
      if (!visit(it->second)) return;
  }
}

}  // namespace granary::scheduler
