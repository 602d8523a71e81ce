#include "engine/core/blocked_time.h"

#include <algorithm>

namespace granary::cache {

std::chrono::nanoseconds BlockedTime::add(Time start, Time end) {
  if (end <= start) return {};
  std::chrono::nanoseconds added = end - start;
  // Merge every interval that overlaps or touches [start, end) into one, taking their
  // overlap off what is added.
  auto it = covered_.upper_bound(start);
  if (it != covered_.begin() && std::prev(it)->second >= start) --it;
  Time mergedStart = start, mergedEnd = end;
  while (it != covered_.end() && it->first <= end) {
    added -=
        std::max(std::chrono::nanoseconds(0),
                 std::chrono::nanoseconds(std::min(end, it->second) - std::max(start, it->first)));
    mergedStart = std::min(mergedStart, it->first);
    mergedEnd = std::max(mergedEnd, it->second);
    it = covered_.erase(it);
  }
  covered_.emplace(mergedStart, mergedEnd);
  // Forget what ended long before the newest end.
  const Time newest = std::max(end, std::prev(covered_.end())->second);
  while (!covered_.empty() && covered_.begin()->second < newest - kHorizon)
    covered_.erase(covered_.begin());
  total_ += added;
  return added;
}

std::chrono::nanoseconds BlockedTime::uncovered(Time start, Time end) const {
  if (end <= start) return {};
  std::chrono::nanoseconds left = end - start;
  auto it = covered_.upper_bound(start);
  if (it != covered_.begin()) --it;
  for (; it != covered_.end() && it->first < end; ++it)
    left -=
        std::max(std::chrono::nanoseconds(0),
                 std::chrono::nanoseconds(std::min(end, it->second) - std::max(start, it->first)));
  return left;
}

}  // namespace granary::cache
