#include "engine/core/dataset_phase.h"

#include <gtest/gtest.h>

namespace granary::cache {
namespace {

// A pass over a share of 10 files, 1000 bytes, under a quota of 4000 bytes.
PassFacts pass(int64_t cachedFiles) {
  PassFacts facts;
  facts.share = {.ownedFiles = 10,
                 .ownedBytes = 1000,
                 .cachedFiles = cachedFiles,
                 .cachedBytes = cachedFiles * 100,
                 .capacityBytes = 4000};
  return facts;
}

TEST(JudgePass, ReadyOnlyWhenEveryOwnedFileIsCached) {
  EXPECT_EQ(judgePass(pass(10)).phase, Phase::kReady);
  EXPECT_EQ(judgePass(pass(10)).next, AfterPass::kDone);
  EXPECT_NE(judgePass(pass(9)).phase, Phase::kReady);
}

// A share short of cached with nothing failed or refused is not a full quota: a reader's or a
// peer's fetch was still keeping files when the pass ended (two replicas warming each other).
// The pass runs again; once its retries are spent the shortfall is settled as QuotaFull.
TEST(JudgePass, AShortfallNothingRefusedIsWarmedAgain) {
  PassFacts facts = pass(9);
  facts.retriesLeft = true;
  PassOutcome outcome = judgePass(facts);
  EXPECT_EQ(outcome.phase, Phase::kWarming);
  EXPECT_EQ(outcome.next, AfterPass::kRetry);
  EXPECT_EQ(outcome.message, "1 owned files are not cached yet; warming them again");
  facts.retriesLeft = false;
  EXPECT_EQ(judgePass(facts).phase, Phase::kQuotaFull);
  facts.retriesLeft = true;
  facts.share.evictedForRoom = true;
  outcome = judgePass(facts);
  EXPECT_EQ(outcome.phase, Phase::kQuotaFull) << "the disk said no";
  EXPECT_NE(outcome.message.find("cache directories filled before"), std::string::npos);
}

TEST(JudgePass, AQuotaThatFilledNamesTheQuotaAndTheFix) {
  PassFacts facts = pass(4);
  facts.share.capacityReached = true;
  const PassOutcome outcome = judgePass(facts);
  EXPECT_EQ(outcome.phase, Phase::kQuotaFull);
  EXPECT_EQ(outcome.next, AfterPass::kDone);
  EXPECT_NE(outcome.message.find("quota is full (4000 bytes on this node)"), std::string::npos)
      << outcome.message;
  EXPECT_NE(outcome.message.find("400 of 1000 owned bytes cached"), std::string::npos);
  EXPECT_NE(outcome.message.find("raise spec.cache.capacityPerNode to at least 1000 bytes"),
            std::string::npos);
  EXPECT_NE(outcome.message.find("policy LRU"), std::string::npos);
  facts.share.pin = false;
  EXPECT_EQ(judgePass(facts).message.find("LRU"), std::string::npos) << "LRU already";
  // Under the quota, yet not all cached: the disk filled first.
  PassFacts disk = pass(4);
  disk.share.evictedForRoom = true;
  EXPECT_NE(judgePass(disk).message.find("cache directories filled before"), std::string::npos);
}

TEST(JudgePass, FailuresComeBeforeTheQuota) {
  PassFacts facts = pass(4);
  facts.failedChunks = 3;
  facts.lastError = "origin down";
  facts.retriesLeft = true;
  PassOutcome outcome = judgePass(facts);
  EXPECT_EQ(outcome.next, AfterPass::kRetry);
  EXPECT_EQ(outcome.phase, Phase::kWarming);
  EXPECT_EQ(outcome.message, "3 chunks failed (origin down); retrying");
  facts.retriesLeft = false;
  outcome = judgePass(facts);
  EXPECT_EQ(outcome.phase, Phase::kDegraded);
  EXPECT_EQ(outcome.next, AfterPass::kDone);

  facts.diskFull = true;
  outcome = judgePass(facts);
  EXPECT_EQ(outcome.phase, Phase::kDegraded);
  EXPECT_EQ(outcome.next, AfterPass::kRetryWhenRoom);

  facts.changedFiles = {"a", "b", "c", "d"};
  outcome = judgePass(facts);
  EXPECT_EQ(outcome.phase, Phase::kDegraded);
  EXPECT_EQ(outcome.next, AfterPass::kDone);
  EXPECT_NE(outcome.message.find("4 files changed at the origin"), std::string::npos);
  EXPECT_NE(outcome.message.find("(a, b, c, ...)"), std::string::npos) << outcome.message;
}

TEST(Phases, SettledAndAsConfigured) {
  for (Phase phase : {Phase::kPending, Phase::kListing, Phase::kWarming}) {
    EXPECT_FALSE(phaseSettled(phase)) << phaseName(phase);
    EXPECT_FALSE(phaseAsConfigured(phase)) << phaseName(phase);
  }
  for (Phase phase : {Phase::kReady, Phase::kOnDemand, Phase::kQuotaFull}) {
    EXPECT_TRUE(phaseSettled(phase)) << phaseName(phase);
    EXPECT_TRUE(phaseAsConfigured(phase)) << phaseName(phase);
  }
  for (Phase phase : {Phase::kDegraded, Phase::kFailed}) {
    EXPECT_TRUE(phaseSettled(phase)) << phaseName(phase);
    EXPECT_FALSE(phaseAsConfigured(phase)) << phaseName(phase);
  }
  EXPECT_EQ(phaseName(Phase::kOnDemand), "OnDemand");
  EXPECT_EQ(phaseName(Phase::kQuotaFull), "QuotaFull");
}

}  // namespace
}  // namespace granary::cache
