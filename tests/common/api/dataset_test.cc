// The Dataset's phases, as the operator and granaryctl run read them.
#include "common/api/dataset.h"

#include <gtest/gtest.h>

namespace granary::api {
namespace {

constexpr DatasetPhase kEveryPhase[] = {DatasetPhase::kPending,  DatasetPhase::kListing,
                                        DatasetPhase::kWarming,  DatasetPhase::kReady,
                                        DatasetPhase::kDegraded, DatasetPhase::kFailed,
                                        DatasetPhase::kOnDemand, DatasetPhase::kQuotaFull};

TEST(DatasetPhase, NamesRoundTrip) {
  for (const DatasetPhase phase : kEveryPhase)
    EXPECT_EQ(datasetPhaseOf(datasetPhaseName(phase)), phase) << datasetPhaseName(phase);
  EXPECT_EQ(datasetPhaseOf(""), std::nullopt);
  EXPECT_EQ(datasetPhaseOf("ready"), std::nullopt) << "names are case-sensitive, as the CRD's enum";
}

// A job waiting under BeforeStart starts on Ready, and on what its datasets' own settings leave
// short of Ready; an OnJob dataset that is on demand is waiting for this very job.
TEST(DatasetPhase, WhatLetsAWaitingJobStart) {
  for (const WarmPolicy warm : {WarmPolicy::kOnCreate, WarmPolicy::kOnJob, WarmPolicy::kNever}) {
    EXPECT_TRUE(letsWaitingJobsStart(DatasetPhase::kReady, warm));
    EXPECT_TRUE(letsWaitingJobsStart(DatasetPhase::kQuotaFull, warm));
    for (const DatasetPhase phase :
         {DatasetPhase::kPending, DatasetPhase::kListing, DatasetPhase::kWarming,
          DatasetPhase::kDegraded, DatasetPhase::kFailed})
      EXPECT_FALSE(letsWaitingJobsStart(phase, warm)) << datasetPhaseName(phase);
  }
  EXPECT_TRUE(letsWaitingJobsStart(DatasetPhase::kOnDemand, WarmPolicy::kNever));
  EXPECT_FALSE(letsWaitingJobsStart(DatasetPhase::kOnDemand, WarmPolicy::kOnJob));
  EXPECT_FALSE(letsWaitingJobsStart(DatasetPhase::kOnDemand, WarmPolicy::kOnCreate));
}

}  // namespace
}  // namespace granary::api
