#include "engine/standalone.h"

#include <gtest/gtest.h>

namespace granary::cache {
namespace {

DatasetState warming(double bytesPerSecond, int64_t etaSeconds) {
  DatasetState state;
  state.phase = Phase::kWarming;
  state.progress = {.totalFiles = 10,
                    .totalBytes = 64 << 20,
                    .ownedFiles = 10,
                    .ownedBytes = 64 << 20,
                    .cachedFiles = 4,
                    .cachedBytes = 16 << 20,
                    .bytesPerSecond = bytesPerSecond,
                    .etaSeconds = etaSeconds};
  return state;
}

const DatasetKey kKey{"ml", "imagenet", 1, "u-1"};

TEST(ProgressLine, AWarmingDatasetShowsItsRateAndETA) {
  EXPECT_EQ(progressLine(kKey, warming(8 << 20, 6)),
            "ml/imagenet Warming 4/10 files 16Mi/64Mi (25%) 8Mi/s ETA 6s");
}

TEST(ProgressLine, NoRateNorETABeforeTheRateIsKnown) {
  EXPECT_EQ(progressLine(kKey, warming(0, -1)), "ml/imagenet Warming 4/10 files 16Mi/64Mi (25%)");
}

TEST(ProgressLine, AReadyDatasetShowsNoETA) {
  DatasetState ready = warming(8 << 20, 0);
  ready.phase = Phase::kReady;
  ready.progress.cachedFiles = 10;
  ready.progress.cachedBytes = 64 << 20;
  EXPECT_EQ(progressLine(kKey, ready), "ml/imagenet Ready 10/10 files 64Mi/64Mi (100%) 8Mi/s");
  // Ready with bytes left (its quota is full): still no ETA, whatever the progress says.
  DatasetState full = warming(8 << 20, 6);
  full.phase = Phase::kReady;
  full.message = "the dataset's cache quota is full";
  EXPECT_EQ(progressLine(kKey, full),
            "ml/imagenet Ready 4/10 files 16Mi/64Mi (25%) 8Mi/s (the dataset's cache quota is "
            "full)");
}

TEST(ProgressLine, OnlyWarmingHasAnETA) {
  for (Phase phase : {Phase::kPending, Phase::kListing, Phase::kDegraded, Phase::kFailed,
                      Phase::kOnDemand, Phase::kQuotaFull}) {
    DatasetState state = warming(8 << 20, 6);
    state.phase = phase;
    EXPECT_EQ(progressLine(kKey, state).find("ETA"), std::string::npos) << phaseName(phase);
  }
}

TEST(ProgressLine, OnDemandAndQuotaFullShowTheCachedFraction) {
  DatasetState onDemand = warming(0, -1);
  onDemand.phase = Phase::kOnDemand;
  onDemand.message = "warm: Never; files are cached as they are read";
  EXPECT_EQ(progressLine(kKey, onDemand),
            "ml/imagenet OnDemand 4/10 files 16Mi/64Mi (25%) (warm: Never; files are cached as "
            "they are read)");
  DatasetState full = warming(8 << 20, 6);
  full.phase = Phase::kQuotaFull;
  EXPECT_EQ(progressLine(kKey, full), "ml/imagenet QuotaFull 4/10 files 16Mi/64Mi (25%) 8Mi/s");
}

}  // namespace
}  // namespace granary::cache
