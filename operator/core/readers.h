// Who reads a Dataset: the TrainingJob workers that mount it through a csi.granary.io inline
// volume, scheduled and not finished. The Dataset controller tells the cache nodes about them
// (SetWarmPlan), so an OnJob dataset starts warming once a job is placed, and nodes know which
// pods to expect. Pure.
#pragma once

#include <string>
#include <vector>

#include "common/kube/object.h"

namespace granary::op {

struct DatasetReader {
  std::string podNamespace, podName, podUid, node;
  int rank = -1;  // the granary.io/rank label; -1 without one

  bool operator==(const DatasetReader&) const = default;
};

// Names of the datasets `pod` mounts through csi.granary.io inline volumes.
std::vector<std::string> datasetsMountedBy(const kube::Json& pod);

// The readers of dataset `name` among `pods` (of its namespace), ordered by pod name.
std::vector<DatasetReader> readersOf(const std::vector<kube::ObjectPtr>& pods,
                                     const std::string& name);

}  // namespace granary::op
