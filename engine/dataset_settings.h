// A dataset generation's settings on this node and the operator's warm plan: what DatasetCache
// and its Warmer are configured with.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace granary::cache {

enum class Eviction { kPin, kLru };
enum class WarmMode { kOnCreate, kOnJob, kNever };

struct DatasetSettings {
  std::vector<std::string> nodeSet;  // every node caching the dataset, this one included
  int replicas = 1;
  int64_t chunkSize = 16 << 20;
  int64_t capacityBytes = 0;  // the dataset's quota on this node
  Eviction eviction = Eviction::kPin;
  WarmMode warm = WarmMode::kOnCreate;
  int warmConcurrency = 8;     // origin fetches in flight while warming
  int64_t bandwidthLimit = 0;  // this dataset's origin reads, bytes per second; 0 unlimited
  // First pause before a pass retries chunks that failed; doubles up to a minute.
  std::chrono::milliseconds warmRetryDelay{1000};
  // How long a reader's fetch from the origin retries what fails for a moment (Unavailable: the
  // origin down, a body shorter than its range) before the read fails.
  std::chrono::milliseconds readRetryTime{30'000};
};

// Warm control from the operator: order, pause, priority, and whether a job reads the dataset
// (which starts warming under WarmMode::kOnJob).
struct WarmPlan {
  // Paths in the order readers open them: warmed first, in this order.
  std::vector<std::string> accessOrder;
  // A file of the dataset listing more such paths, one a line (parseAccessOrder), warmed after
  // accessOrder's; "" none. Read through the cache once listed. Paths not in the manifest and a
  // missing file are said in the status message, never a failure.
  std::string accessOrderFile;
  bool paused = false;
  bool hasReaders = false;
  // Higher warms first when several datasets of the node warm at once (WarmPriorities).
  int priority = 0;
};

}  // namespace granary::cache
