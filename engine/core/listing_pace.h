// How many parts of a listing to list side by side. Parts listed side by side interleave their
// keys in the manifest store, which costs its compaction dearly at scale, so a listing starts
// with one lister and adds another only while the store waits for a remote origin: while every
// one of the last kSettlePages pages took longer to come than the listers' pages take to store,
// and longer than kNearbyPage. A page that comes sooner is from a store nearby, or late only
// because the node's own cores are busy (storing, compacting) or the host stalled: more listers
// would not make it come sooner, and the compaction their keys cost would slow the node further.
// Pure; not thread-safe (callers serialize).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace granary::cache {

class ListingPace {
 public:
  // Pages at the start of a listing that say nothing of its pace, and pages a new lister is given
  // to show its effect before another is considered (the pages each decision looks at).
  static constexpr int kIgnoredPages = 2;
  static constexpr int kSettlePages = 8;
  static constexpr std::chrono::milliseconds kNearbyPage{10};

  // Up to `maxListers`, starting with `listers` (1 but where the caller starts more at once).
  explicit ListingPace(int maxListers, int listers = 1)
      : maxListers_(maxListers), listers_(listers) {}

  // A page came after `waited` (fetching and parsing it) and was stored in `stored` (waiting
  // for the store included). Whether to start another lister now; if so, it counts as started.
  bool page(std::chrono::nanoseconds waited, std::chrono::nanoseconds stored);
  // A lister ended (its parts are listed).
  void listerEnded() { --listers_; }
  int listers() const { return listers_; }

 private:
  const int maxListers_;
  int listers_;
  int ignored_ = kIgnoredPages;
  int settling_ = kSettlePages;
  int64_t pages_ = 0;  // past the ignored ones
  // How long each of the last kSettlePages pages took to come.
  std::array<int64_t, kSettlePages> recentWaits_{};
  // How long a page takes to store, smoothed over pages (each new page weighs a quarter).
  double stored_ = 0;
};

}  // namespace granary::cache
