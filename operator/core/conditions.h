// Status conditions (metav1.Condition) of granary's resources, kept in a JSON array as the API
// server stores them. Pure.
#pragma once

#include <chrono>
#include <string>

#include "common/kube/object.h"

namespace granary::op {

struct Condition {
  std::string type;     // CamelCase, e.g. "Ready"
  bool status = false;  // "True" / "False"
  std::string reason;   // CamelCase, e.g. "Warming"
  std::string message;
};

// Sets `condition` in `conditions` (an array, or null for none yet). lastTransitionTime
// changes only when the status flips, so writing the same condition again changes nothing.
void setCondition(kube::Json& conditions, const Condition& condition, int64_t observedGeneration,
                  std::chrono::system_clock::time_point now);

// The condition of `type` in a status; status "Unknown" when absent.
Condition conditionOf(const kube::Json& status, const std::string& type);

}  // namespace granary::op
