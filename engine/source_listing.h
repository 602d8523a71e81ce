// One source of a dataset listed into its generation's manifest: the parts of its key order still
// to list (ListingProgress::ranges), by one lister at first and by more while the store waits
// for the origin (engine/core/listing_pace.h), up to `maxListers`. Each batch is stored with the
// progress it makes, so that a listing cut short goes on in each part where it stood; the first
// error ends every lister.
#pragma once

#include <functional>
#include <span>
#include <stop_token>
#include <string>

#include "common/result.h"
#include "engine/chunk_fetcher.h"
#include "engine/store/manifest_store.h"

namespace granary::cache {

struct SourceListing {
  using Stored = std::function<void(std::span<const ManifestEntry>, std::stop_token)>;

  ManifestStore& manifests;
  std::string generation;
  const DatasetSource& source;
  int maxListers = 1;
  // After each batch is stored: the totals stored so far, called one batch at a time, in the
  // order they were stored (none: not called).
  std::function<void(const ManifestTotals&)> counted;
  // Then the batch itself, from the thread that stored it, side by side with other parts'
  // (none: not called).
  Stored stored;
  // Whether each batch is stored with the progress it makes (ManifestStore::progress), so that a
  // listing cut short goes on where it stood. Off for a share of a listing that other nodes list
  // the rest of: what this node took from them is not in its progress.
  bool recordProgress = true;
  // Whether listers are added at the origin's pace (engine/core/listing_pace.h). Off: up to
  // `maxListers` side by side from the start, for a share of a listing, whose keys the shares
  // followed from other nodes interleave in the store anyway.
  bool paced = true;
};

// Lists the parts of source `progress.source` left in `progress` (none: nothing to list); once
// all are listed, `progress`, stored, names the next source.
Status listSource(const SourceListing& listing, ListingProgress& progress, std::stop_token stop);

}  // namespace granary::cache
