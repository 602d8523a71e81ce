#include "engine/core/dataset_phase.h"

namespace granary::cache {
namespace {

std::string cachedOfOwned(const ShareFacts& share) {
  return std::to_string(share.cachedBytes) + " of " + std::to_string(share.ownedBytes) +
         " owned bytes cached";
}

}  // namespace

std::string someOf(const std::set<std::string>& paths) {
  std::string text;
  int shown = 0;
  for (const auto& path : paths) {
    if (shown == 3) return text + ", ...";
    text += (shown++ ? ", " : "") + path;
  }
  return text;
}

bool phaseSettled(Phase phase) {
  return phase != Phase::kPending && phase != Phase::kListing && phase != Phase::kWarming;
}

bool phaseAsConfigured(Phase phase) {
  return phase == Phase::kReady || phase == Phase::kOnDemand || phase == Phase::kQuotaFull;
}

std::string quotaFullMessage(const ShareFacts& share) {
  if (!share.capacityReached && share.ownedBytes <= share.capacityBytes) {
    return "the cache directories filled before the dataset's quota: " + cachedOfOwned(share) +
           "; the rest is read from the origin; free room on the node's cache directories";
  }
  return "the dataset's cache quota is full (" + std::to_string(share.capacityBytes) +
         " bytes on this node): " + cachedOfOwned(share) +
         "; the rest is read from the origin; raise spec.cache.capacityPerNode to at least " +
         std::to_string(share.ownedBytes) + " bytes" +
         (share.pin ? ", or use policy LRU to keep what is read most" : "");
}

PassOutcome judgePass(const PassFacts& facts) {
  if (!facts.changedFiles.empty()) {
    return {Phase::kDegraded,
            std::to_string(facts.changedFiles.size()) +
                " files changed at the origin since they were listed and are not served (" +
                someOf(facts.changedFiles) +
                "); change the Dataset's spec (a new generation) to list them again"};
  }
  if (facts.diskFull) {
    // Room may return (a temporary file removed, another dataset purged). Readers are served
    // from the origin meanwhile.
    return {
        Phase::kDegraded,
        "the cache directories are full (" + facts.lastError + "); " + cachedOfOwned(facts.share),
        AfterPass::kRetryWhenRoom};
  }
  if (facts.failedChunks > 0 && facts.retriesLeft) {
    return {
        Phase::kWarming,
        std::to_string(facts.failedChunks) + " chunks failed (" + facts.lastError + "); retrying",
        AfterPass::kRetry};
  }
  if (facts.failedChunks > 0) {
    return {Phase::kDegraded, std::to_string(facts.failedChunks) +
                                  " chunks could not be fetched: " + facts.lastError};
  }
  const ShareFacts& share = facts.share;
  if (share.cachedFiles < share.ownedFiles) {
    const bool refused =
        share.capacityReached || share.evictedForRoom || share.ownedBytes > share.capacityBytes;
    if (refused || !facts.retriesLeft) return {Phase::kQuotaFull, quotaFullMessage(share)};
    // Nothing failed or was refused: files a reader's or a peer's fetch was still keeping.
    return {Phase::kWarming,
            std::to_string(share.ownedFiles - share.cachedFiles) +
                " owned files are not cached yet; warming them again",
            AfterPass::kRetry};
  }
  return {Phase::kReady, ""};
}

}  // namespace granary::cache
