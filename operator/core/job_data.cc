#include "operator/core/job_data.h"

#include <algorithm>
#include <cmath>

namespace granary::op {

using kube::Json;

namespace {

double rounded(double fraction) { return std::round(fraction * 1000) / 1000; }

template <typename T>
T increase(T earlier, T later) {
  return later >= earlier ? later - earlier : later;
}

}  // namespace

Json dataSummary(const JobSample& earlier, const JobSample& later) {
  const double seconds = std::chrono::duration<double>(later.at - earlier.at).count();
  if (seconds <= 0) return Json();
  double wait = 0;
  int64_t read = 0, workers = 0, local = 0, total = 0;
  for (const auto& [uid, now] : later.workers) {
    local += now.localBytes;
    total += now.localBytes + now.remoteBytes;
    const auto before = earlier.workers.find(uid);
    if (before == earlier.workers.end()) continue;
    ++workers;
    wait += increase(before->second.waitSeconds, now.waitSeconds);
    read += increase(before->second.localBytes, now.localBytes) +
            increase(before->second.remoteBytes, now.remoteBytes);
  }
  if (workers == 0) return Json();
  Json data = Json::object();
  data["waitFraction"] =
      Json::number(rounded(std::min(1.0, wait / (seconds * static_cast<double>(workers)))));
  data["readBytesPerSecond"] =
      Json::number(static_cast<int64_t>(static_cast<double>(read) / seconds));
  if (total > 0)
    data["localFraction"] =
        Json::number(rounded(static_cast<double>(local) / static_cast<double>(total)));
  return data;
}

Json gpuSummary(const JobSample& earlier, const JobSample& later) {
  const double seconds = std::chrono::duration<double>(later.at - earlier.at).count();
  double utilization = 0, memory = 0;
  int gpus = 0;
  for (const auto& [uuid, now] : later.gpus) {
    const auto before = earlier.gpus.find(uuid);
    if (before == earlier.gpus.end()) continue;
    const double sampled = now.sampledSeconds - before->second.sampledSeconds;
    if (sampled <= 0) continue;  // no sample since, or its node restarted
    utilization += (now.busySeconds - before->second.busySeconds) / sampled;
    memory += (now.memoryByteSeconds - before->second.memoryByteSeconds) / sampled;
    ++gpus;
  }
  if (gpus == 0 || seconds <= 0) return Json();
  Json gpu = Json::object();
  gpu["windowSeconds"] = Json::number(static_cast<int64_t>(std::lround(seconds)));
  gpu["utilization"] = Json::number(rounded(std::clamp(utilization / gpus, 0.0, 1.0)));
  gpu["memoryUsedBytes"] = Json::number(static_cast<int64_t>(std::max(0.0, memory)));
  double starved = 0;
  int pods = 0;
  for (const auto& [pod, now] : later.starvedSeconds) {
    const auto before = earlier.starvedSeconds.find(pod);
    if (before == earlier.starvedSeconds.end()) continue;
    starved += std::min(1.0, increase(before->second, now) / seconds);
    ++pods;
  }
  if (pods > 0) gpu["dataStarvedFraction"] = Json::number(rounded(starved / pods));
  return gpu;
}

}  // namespace granary::op
