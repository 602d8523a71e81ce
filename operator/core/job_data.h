// The live summary of a TrainingJob's data path for its status: how much of the time its
// workers were blocked on data, how fast they read and how much came from the cache on their
// own node; and their GPUs, once cache-node telemetry carries GPU samples. Pure.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/kube/object.h"

namespace granary::op {

// One worker's reads so far (cumulative, summed over the job's datasets), from the cache node
// of the worker's node.
struct WorkerReads {
  double waitSeconds = 0;  // blocked on chunks the node did not hold
  int64_t localBytes = 0;
  int64_t remoteBytes = 0;  // from peers and the origin
};

// One GPU's totals as its cache node integrates them (cumulative since the node first saw it):
// seconds sampled, utilization × seconds, memory used × seconds.
struct GpuTotals {
  double sampledSeconds = 0;
  double busySeconds = 0;
  double memoryByteSeconds = 0;
};

struct JobSample {
  Clock::MonoTime at{};
  // By pod uid: every worker whose node answered (zeros until it reads), none other.
  std::map<std::string, WorkerReads> workers;
  std::map<std::string, GpuTotals> gpus;  // of the workers' pods, by UUID
  // By pod name: cumulative data-starved seconds of the workers' pods with GPUs.
  std::map<std::string, double> starvedSeconds;
};

// status.data: over the interval between two samples, counting the workers present in both,
// waitFraction (summed wait ÷ (interval × workers), at most 1: parallel loader processes of
// one worker add up) and readBytesPerSecond; and localFraction, the local share of every byte
// the later sample's workers have read so far (absent before any). Fractions are rounded to
// 0.001 so that noise does not rewrite status. Null when no worker is in both samples or the
// interval is empty. A counter that went down (the node restarted) counts from zero.
kube::Json dataSummary(const JobSample& earlier, const JobSample& later);

// status.gpu, over the window between two samples (windowSeconds), counting the GPUs present in
// both with samples in between: utilization, the GPUs' mean utilization over it, and
// memoryUsedBytes, their summed mean memory used; and dataStarvedFraction, the mean of the share
// of the window each pod present in both samples was data-starved (its GPUs idle while its
// readers waited; see engine/core/data_starvation.h). Null when no GPU is
// in both (a node that restarted starts its totals over: its GPUs count again from the next).
kube::Json gpuSummary(const JobSample& earlier, const JobSample& later);

}  // namespace granary::op
