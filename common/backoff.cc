#include "common/backoff.h"

#include <algorithm>
#include <cmath>

namespace granary {

std::chrono::milliseconds Backoff::next() {
  const double base = static_cast<double>(options_.initial.count()) *
                      std::pow(options_.factor, std::min(attempt_, 64));
  const double capped = std::min(base, static_cast<double>(options_.max.count()));
  ++attempt_;
  std::uniform_real_distribution<double> spread(1.0 - options_.jitter, 1.0);
  return std::chrono::milliseconds(static_cast<long long>(capped * spread(random_)));
}

}  // namespace granary
