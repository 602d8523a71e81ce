#include "engine/checkpoint/tree_journal.h"

#include <gtest/gtest.h>

namespace granary::checkpoint {
namespace {

const WallTime kNow{};

FileIdentity id(uint64_t inode, int64_t size, int64_t modified = 1) {
  return {.device = 1, .inode = inode, .size = size, .modifiedNanos = modified};
}

DrainStep upload(const std::string& path, uint64_t seq) {
  return {DrainStep::Kind::kUpload, path, seq};
}

// Carries out every step the planner starts until there are none.
void drainAll(TreeJournal& journal) {
  for (int round = 0; round < 100; ++round) {
    const DrainPlan plan = planDrain(journal.observe(0, 4, 0));
    journal.settle(plan.settled);
    if (plan.start.empty()) return;
    for (const DrainStep& step : plan.start) {
      journal.started(step);
      journal.finished(step);
    }
  }
  FAIL() << "the drain did not settle";
}

TEST(TreeJournalTest, AClosedFileIsPendingUntilItsUploadFinishes) {
  TreeJournal journal;
  journal.closed("step-1/__0_0.distcp", id(10, 100), kNow);
  EXPECT_FALSE(journal.drained());
  const DrainPlan plan = planDrain(journal.observe(0, 4, 0));
  ASSERT_EQ(plan.start.size(), 1u);
  EXPECT_EQ(plan.start[0], upload("step-1/__0_0.distcp", 1));
  journal.started(plan.start[0]);
  journal.finished(plan.start[0]);
  EXPECT_TRUE(journal.drained());
  EXPECT_EQ(journal.record(), (std::vector<OriginEntry>{{"step-1/__0_0.distcp", id(10, 100)}}));
}

TEST(TreeJournalTest, AFileBeingWrittenIsNotDrained) {
  TreeJournal journal;
  journal.writing("model.pt");
  EXPECT_FALSE(journal.drained());
  EXPECT_TRUE(planDrain(journal.observe(0, 4, 0)).start.empty());
  journal.closed("model.pt", id(3, 10), kNow);
  drainAll(journal);
  EXPECT_TRUE(journal.drained());
}

// A temporary file renamed away before its close was seen (DCP's .metadata.tmp, found by the scan
// of a new directory as .metadata already) leaves nothing being written.
TEST(TreeJournalTest, AFileSeenWrittenThenGoneBeforeItsCloseIsNotWrittenAnyMore) {
  TreeJournal journal;
  journal.closed("step-1/.metadata", id(10, 100), kNow);
  journal.writing("step-1/.metadata.tmp");
  journal.removed("step-1/.metadata.tmp", false);
  drainAll(journal);
  EXPECT_TRUE(journal.drained());
  EXPECT_TRUE(journal.observe(0, 4, 0).writing.empty());
}

// latest.tmp renamed to latest while its upload was under way: the upload that ended anyway is
// removed at the origin again.
TEST(TreeJournalTest, AnUploadThatEndedAfterItsFileWasRenamedAwayIsRemovedAtTheOrigin) {
  TreeJournal journal;
  journal.closed("latest.tmp", id(10, 10), kNow);
  const DrainPlan plan = planDrain(journal.observe(0, 4, 0));
  ASSERT_EQ(plan.start, std::vector{upload("latest.tmp", 1)});
  journal.started(plan.start[0]);
  journal.removed("latest.tmp", false);
  journal.closed("latest", id(10, 10), kNow);
  journal.finished(plan.start[0]);
  const DrainPlan next = planDrain(journal.observe(0, 4, 0));
  EXPECT_EQ(next.start, (std::vector{DrainStep{DrainStep::Kind::kRemove, "latest.tmp", 2}}))
      << "the marker `latest` follows the removal beside it";
  drainAll(journal);
  EXPECT_TRUE(journal.drained());
  ASSERT_EQ(journal.record().size(), 1u);
  EXPECT_EQ(journal.record()[0].path, "latest");
}

// A symbolic link is told, not drained; one made over a drained file removes that file at the
// origin, and it goes with its directory.
TEST(TreeJournalTest, ALinkIsToldNotDrainedAndReplacesTheFileItWasMadeOver) {
  TreeJournal journal;
  journal.closed("last", id(10, 10), kNow);
  journal.closed("step-1/a", id(11, 10), kNow);
  drainAll(journal);
  journal.linked("last");
  journal.linked("step-1/latest-link");
  EXPECT_EQ(journal.links(), (std::set<std::string>{"last", "step-1/latest-link"}));
  EXPECT_EQ(planDrain(journal.observe(0, 4, 0)).start,
            (std::vector{DrainStep{DrainStep::Kind::kRemove, "last", 3}}));
  drainAll(journal);
  EXPECT_TRUE(journal.drained()) << "links never hold the drain up";
  journal.removed("step-1", true);
  EXPECT_EQ(journal.links(), std::set<std::string>{"last"});
  journal.closed("last", id(12, 10), kNow);  // a file renamed over the link
  EXPECT_TRUE(journal.links().empty());
}

TEST(TreeJournalTest, TheSameFileSeenAgainIsNoNewVersion) {
  TreeJournal journal;
  journal.closed("a", id(1, 5), kNow);
  drainAll(journal);
  journal.closed("a", id(1, 5), kNow);  // a rescan
  EXPECT_TRUE(journal.drained());
  journal.closed("a", id(1, 6, 2), kNow);  // written again
  EXPECT_FALSE(journal.drained());
  EXPECT_EQ(journal.identity("a", 2), id(1, 6, 2));
  EXPECT_EQ(journal.identity("a", 1), std::nullopt);
}

TEST(TreeJournalTest, ARemovedDirectoryRemovesEveryFileBelowItAtTheOrigin) {
  TreeJournal journal;
  journal.closed("checkpoint-1/model.safetensors", id(1, 5), kNow);
  journal.closed("checkpoint-1/optimizer.pt", id(2, 5), kNow);
  journal.closed("checkpoint-10/model.safetensors", id(3, 5), kNow);
  drainAll(journal);
  journal.removed("checkpoint-1", true);
  EXPECT_FALSE(journal.drained());
  const DrainPlan plan = planDrain(journal.observe(0, 4, 0));
  ASSERT_EQ(plan.start.size(), 2u);
  EXPECT_EQ(plan.start[0].kind, DrainStep::Kind::kRemove);
  EXPECT_EQ(plan.start[0].path, "checkpoint-1/model.safetensors");
  EXPECT_EQ(plan.start[1].path, "checkpoint-1/optimizer.pt");
  drainAll(journal);
  EXPECT_TRUE(journal.drained());
  EXPECT_EQ(journal.record(),
            (std::vector<OriginEntry>{{"checkpoint-10/model.safetensors", id(3, 5)}}));
}

TEST(TreeJournalTest, AFileRemovedBeforeItDrainedIsNeitherUploadedNorRemoved) {
  TreeJournal journal;
  journal.closed(".metadata.tmp", id(1, 5), kNow);
  journal.removed(".metadata.tmp", false);  // renamed to .metadata
  journal.closed(".metadata", id(1, 5), kNow);
  const DrainPlan plan = planDrain(journal.observe(0, 4, 0));
  ASSERT_EQ(plan.start.size(), 1u);
  EXPECT_EQ(plan.start[0].path, ".metadata");
  EXPECT_EQ(plan.settled.size(), 1u);
}

TEST(TreeJournalTest, AfterARestartOnlyWhatChangedIsUploadedAndWhatWentIsRemoved) {
  TreeJournal journal;
  journal.recordAtOrigin({{"kept", id(1, 5)}, {"changed", id(2, 5)}, {"gone", id(3, 5)}});
  journal.closed("kept", id(1, 5), kNow);
  journal.closed("changed", id(2, 7, 9), kNow);
  journal.closed("new", id(4, 1), kNow);
  journal.scanDone();
  DrainPlan plan = planDrain(journal.observe(0, 4, 0));
  std::vector<std::string> started;
  for (const DrainStep& s : plan.start) started.push_back(s.path);
  // The removal found at the restart comes after the files closed before it.
  EXPECT_EQ(started, (std::vector<std::string>{"changed", "new"}));
  drainAll(journal);
  EXPECT_TRUE(journal.drained());
  EXPECT_EQ(
      journal.record(),
      (std::vector<OriginEntry>{{"changed", id(2, 7, 9)}, {"kept", id(1, 5)}, {"new", id(4, 1)}}));
}

TEST(TreeJournalTest, AnUploadOfAVersionWrittenAgainSinceLeavesThePathPending) {
  TreeJournal journal;
  journal.closed("model.pt", id(1, 5), kNow);
  journal.started(upload("model.pt", 1));
  journal.closed("model.pt", id(1, 6, 2), kNow);  // torch.save again, O_TRUNC
  journal.finished(upload("model.pt", 1));
  EXPECT_FALSE(journal.drained());
  const DrainPlan plan = planDrain(journal.observe(0, 4, 0));
  ASSERT_EQ(plan.start.size(), 1u);
  EXPECT_EQ(plan.start[0], upload("model.pt", 2));
}

TEST(TreeJournalTest, ACopyIsHeldForItsWriterUntilItSaysTheOriginHasIt) {
  TreeJournal journal;
  journal.copyArriving("step-1/__1_0.distcp", id(20, 100), "node-a", id(7, 100, 5), false);
  EXPECT_FALSE(journal.closed("step-1/__1_0.distcp", id(20, 100), kNow))
      << "a copy is not written here";
  EXPECT_EQ(journal.observe(1, 4, 4).held, std::set<std::string>{"step-1/__1_0.distcp"});
  EXPECT_TRUE(planDrain(journal.observe(1, 4, 4)).start.empty()) << "neither uploaded nor copied";
  EXPECT_FALSE(journal.drained());
  EXPECT_EQ(journal.heldCopies("node-a"), std::vector<std::string>{"step-1/__1_0.distcp"});

  journal.copyAtOrigin("node-b", "step-1/__1_0.distcp", id(7, 100, 5));
  journal.copyAtOrigin("node-a", "step-1/__1_0.distcp", id(7, 100, 6));
  EXPECT_FALSE(journal.drained()) << "news of another writer, or another version, is not ours";
  journal.copyAtOrigin("node-a", "step-1/__1_0.distcp", id(7, 100, 5));
  EXPECT_TRUE(journal.drained());
  EXPECT_EQ(journal.record(), (std::vector<OriginEntry>{{"step-1/__1_0.distcp", id(20, 100)}}));
  EXPECT_EQ(journal.copyOf("node-a", "step-1/__1_0.distcp", false), id(20, 100));
  EXPECT_EQ(journal.copyOf("node-a", "step-1/__1_0.distcp", true), std::nullopt);
}

TEST(TreeJournalTest, ACopyOfALostWriterIsUploadedFromHere) {
  TreeJournal journal;
  journal.copyArriving("model.pt", id(20, 100), "node-a", id(7, 100), false);
  journal.closed("model.pt", id(20, 100), kNow);
  journal.release("node-a");
  EXPECT_TRUE(journal.observe(1, 4, 4).held.empty());
  EXPECT_EQ(planDrain(journal.observe(0, 4, 0)).start, std::vector{upload("model.pt", 1)});
  drainAll(journal);
  EXPECT_TRUE(journal.drained());
}

TEST(TreeJournalTest, AFileWrittenHereOverACopyIsOursToUpload) {
  TreeJournal journal;
  journal.copyArriving("latest", id(20, 10), "node-a", id(7, 10), false);
  journal.closed("latest", id(20, 10), kNow);
  EXPECT_TRUE(journal.closed("latest", id(21, 12), kNow));
  EXPECT_TRUE(journal.observe(1, 4, 4).held.empty());
  EXPECT_EQ(planDrain(journal.observe(0, 4, 0)).start, std::vector{upload("latest", 2)});
}

TEST(TreeJournalTest, AnEvictedFileLeavesTheTreeWithoutARemovalAndTheRecordForgetsIt) {
  TreeJournal journal;
  journal.closed("step-1/a.bin", id(10, 100), kNow);
  drainAll(journal);
  journal.evicted("step-1/a.bin");
  journal.removed("step-1/a.bin", false);  // the watch sees the unlink
  EXPECT_TRUE(journal.drained()) << "nothing to remove at the origin";
  EXPECT_TRUE(journal.record().empty());
  EXPECT_TRUE(journal.observe(0, 4, 0).removals.empty());
}

TEST(TreeJournalTest, ACopyThatEndsAfterItsFileWentIsRemovedFromThePeers) {
  TreeJournal journal;
  journal.closed("step-1/.metadata.tmp", id(10, 10), kNow);
  const DrainStep copy{DrainStep::Kind::kCopy, "step-1/.metadata.tmp", 1};
  journal.started(copy);
  journal.removed("step-1/.metadata.tmp", false);  // renamed to .metadata while it was copied
  journal.finished(copy, 1);
  EXPECT_EQ(journal.observe(1, 4, 4).uncopies,
            (std::vector<TreeRemoval>{{"step-1/.metadata.tmp", 1}}));
  EXPECT_FALSE(journal.drained()) << "until the peers have removed it";
}

}  // namespace
}  // namespace granary::checkpoint
