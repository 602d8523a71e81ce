#include "engine/core/listing_pace.h"

#include <algorithm>

namespace granary::cache {

bool ListingPace::page(std::chrono::nanoseconds waited, std::chrono::nanoseconds stored) {
  if (ignored_ > 0) {  // the listing's first pages: connections made, a start-after sought
    --ignored_;
    return false;
  }
  constexpr double kWeight = 0.25;
  const bool first = pages_ == 0;
  recentWaits_[static_cast<size_t>(pages_++) % recentWaits_.size()] = waited.count();
  stored_ = first ? static_cast<double>(stored.count())
                  : stored_ + kWeight * (static_cast<double>(stored.count()) - stored_);
  if (settling_ > 0) {
    --settling_;
    return false;
  }
  // Every one of the last pages took at least this long to come: the origin's latency, which a
  // host that stalls now and then (a page late here and there) does not raise.
  const auto floor =
      static_cast<double>(*std::min_element(recentWaits_.begin(), recentWaits_.end()));
  // While a page takes longer to come than the n listers' pages take to store, the store waits
  // for the origin more than it works: one more lister pays for the keys it interleaves.
  const double nearby = static_cast<double>(std::chrono::nanoseconds(kNearbyPage).count());
  if (listers_ >= maxListers_ || floor <= listers_ * stored_ || floor <= nearby) return false;
  ++listers_;
  settling_ = kSettlePages;
  return true;
}

}  // namespace granary::cache
