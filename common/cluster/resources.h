// Resource amounts as Kubernetes counts them, and the requests of a pod. Pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/result.h"

namespace granary::cluster {

inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";

struct Resources {
  int64_t milliCpu = 0;
  int64_t memory = 0;            // bytes
  int64_t ephemeralStorage = 0;  // bytes
  int64_t pods = 0;
  std::map<std::string, int64_t, std::less<>> extended;  // nvidia.com/gpu and others

  int64_t extendedOf(std::string_view name) const;
  int64_t gpus() const { return extendedOf(kGpuResource); }

  Resources& operator+=(const Resources& other);
  Resources& operator-=(const Resources& other);
  friend bool operator==(const Resources&, const Resources&) = default;
};

// Adds one named amount ("cpu", "memory", "ephemeral-storage", "pods" or an extended name)
// given as a Kubernetes quantity ("500m", "2", "200Gi", "8"). InvalidArgument when malformed.
Status addQuantity(Resources& into, const std::string& name, const std::string& quantity);

// The first resource of `request` that `free` lacks, as kube-scheduler names it
// ("Insufficient nvidia.com/gpu"); "" when everything fits.
std::string shortfall(const Resources& request, const Resources& free);

// How many copies of `request` fit in `free` (large when the request is empty).
int64_t copiesThatFit(const Resources& request, const Resources& free);

// What a pod requests, as Kubernetes counts it: the larger of the sum over its containers and
// each init container alone, plus pod overhead, plus one pod slot.
Resources effectiveRequests(const Resources& containersSum, const Resources& largestInit,
                            const Resources& overhead);

}  // namespace granary::cluster
