// The pods whose view of a dataset ended. A running container keeps its own copy of the mount
// it was given; when the FUSE connection behind it dies (this node's pod was replaced without
// handing over, or killed hard, keeper and all), that copy fails every read with "Transport
// endpoint is not connected" until the container is restarted, whatever the node does. The mount
// table binds such views again (so that a restarted container reads) and records the pods here
// until they are unpublished, so that the operator names them (an Event on each pod and on the
// Dataset, the Dataset's ReadersCutOff condition) and restarts TrainingJob workers.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/thread_annotations.h"
#include "engine/cache_metrics.h"

namespace granary::cache {

struct CutOffReader {
  std::string dataset;  // the Dataset the pod mounts, "namespace/name"
  std::string podNamespace, podName, podUid;
  std::chrono::system_clock::time_point since;  // when the node found the view dead

  bool operator==(const CutOffReader&) const = default;
};

class CutOffReaders {
 public:
  // `metrics` (may be null) carries granary_dataset_readers_cut_off per dataset.
  explicit CutOffReaders(CacheMetrics* metrics) : metrics_(metrics) {}

  // Records a pod cut off from a dataset; once per pod and dataset (the first time stays).
  void add(CutOffReader reader);
  // The pod's volume was unpublished (the pod ended): it is no longer cut off.
  void endPod(const std::string& podUid);
  // The pods cut off from `dataset` ("namespace/name"), in the order they were found.
  std::vector<CutOffReader> of(const std::string& dataset) const;

 private:
  void exportLocked(const std::string& dataset) GRANARY_REQUIRES(mutex_);

  CacheMetrics* metrics_;
  mutable Mutex mutex_;
  std::vector<CutOffReader> readers_ GRANARY_GUARDED_BY(mutex_);
};

}  // namespace granary::cache
