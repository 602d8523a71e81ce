#include "engine/checkpoint/drain_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace granary::checkpoint {
namespace {

using Kind = DrainStep::Kind;

DrainStep upload(const std::string& path, uint64_t seq) { return {Kind::kUpload, path, seq}; }
DrainStep removal(const std::string& path, uint64_t seq) { return {Kind::kRemove, path, seq}; }
DrainStep copy(const std::string& path, uint64_t seq) { return {Kind::kCopy, path, seq}; }

// The steps of `plan` at the origin (uploads and removals), in order.
std::vector<DrainStep> atOrigin(const DrainPlan& plan) {
  std::vector<DrainStep> out;
  for (const auto& step : plan.start)
    if (step.kind != Kind::kCopy) out.push_back(step);
  return out;
}

// The steps of `plan` at the peers, in order.
std::vector<DrainStep> atPeers(const DrainPlan& plan) {
  std::vector<DrainStep> out;
  for (const auto& step : plan.start)
    if (step.kind == Kind::kCopy || step.kind == Kind::kUncopy) out.push_back(step);
  return out;
}

DrainObservation withoutCopies() {
  DrainObservation o;
  o.copies = 0;
  return o;
}

TEST(DrainPlanTest, UploadsTheOldestFirstAFewAtATime) {
  DrainObservation o = withoutCopies();
  o.maxUploads = 2;
  o.closed = {{"b", 3}, {"a", 1}, {"c", 2}};
  EXPECT_EQ(atOrigin(planDrain(o)), (std::vector{upload("a", 1), upload("c", 2)}));
  o.underway = {upload("a", 1)};
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{upload("c", 2)}) << "one slot left";
  o.underway.clear();
  o.origin = {{"a", 1}, {"c", 2}};
  const DrainPlan plan = planDrain(o);
  EXPECT_EQ(atOrigin(plan), std::vector{upload("b", 3)});
  ASSERT_TRUE(plan.oldestPending);
  EXPECT_EQ(plan.oldestPending->path, "b");
  o.origin["b"] = 3;
  EXPECT_TRUE(planDrain(o).start.empty());
  EXPECT_FALSE(planDrain(o).oldestPending) << "nothing left to drain";
}

// PyTorch Distributed Checkpoint: a file a rank, then .metadata (renamed from .metadata.tmp).
TEST(DrainPlanTest, AMarkerGoesOnlyAfterEveryFileClosedBeforeIt) {
  DrainObservation o = withoutCopies();
  o.maxUploads = 8;
  o.closed = {{"step-10/__0_0.distcp", 1},
              {"step-10/__1_0.distcp", 2},
              {"step-10/.metadata", 3},
              {"other/late.bin", 4}};
  DrainPlan plan = planDrain(o);
  EXPECT_EQ(atOrigin(plan),
            (std::vector{upload("step-10/__0_0.distcp", 1), upload("step-10/__1_0.distcp", 2),
                         upload("other/late.bin", 4)}))
      << "a later file does not wait for the marker";
  EXPECT_EQ(plan.heldMarkers, 1);
  o.origin = {{"step-10/__0_0.distcp", 1}};  // one rank's file there, the other's still going
  o.underway = {upload("step-10/__1_0.distcp", 2), upload("other/late.bin", 4)};
  EXPECT_TRUE(atOrigin(planDrain(o)).empty());
  o.origin["step-10/__1_0.distcp"] = 2;
  o.underway = {upload("other/late.bin", 4)};
  o.writing = {"step-10/__2_0.distcp"};  // a rank still writing its file
  EXPECT_TRUE(atOrigin(planDrain(o)).empty()) << "the checkpoint is not whole yet";
  o.writing = {"other/open.bin"};  // a file the marker does not speak for
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{upload("step-10/.metadata", 3)});
}

// A directory renamed into place (step-20.tmp/ -> step-20/): its files share the rename's seq,
// and its marker still goes last.
TEST(DrainPlanTest, AMarkerRenamedIntoPlaceWithItsFilesGoesLast) {
  DrainObservation o = withoutCopies();
  o.maxUploads = 8;
  o.closed = {{"step-20/model.safetensors", 7}, {"step-20/latest", 7}, {"step-20/optim.bin", 7}};
  EXPECT_EQ(atOrigin(planDrain(o)),
            (std::vector{upload("step-20/model.safetensors", 7), upload("step-20/optim.bin", 7)}));
  o.origin = {{"step-20/model.safetensors", 7}, {"step-20/optim.bin", 7}};
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{upload("step-20/latest", 7)});
}

// Rotation (save_total_limit, keep_latest_k): the oldest checkpoint deleted while newer files
// still drain. Its removal reaches the origin only after the files closed before it.
TEST(DrainPlanTest, ARemovalWaitsForTheFilesClosedBeforeIt) {
  DrainObservation o = withoutCopies();
  o.maxUploads = 8;
  o.origin = {{"checkpoint-1/model.bin", 1}};
  o.closed = {{"checkpoint-2/model.bin", 5}, {"checkpoint-3/model.bin", 9}};
  o.removals = {{"checkpoint-1/model.bin", 6}};
  EXPECT_EQ(atOrigin(planDrain(o)), (std::vector{upload("checkpoint-2/model.bin", 5),
                                                 upload("checkpoint-3/model.bin", 9)}));
  o.origin["checkpoint-2/model.bin"] = 5;
  EXPECT_EQ(atOrigin(planDrain(o)), (std::vector{removal("checkpoint-1/model.bin", 6),
                                                 upload("checkpoint-3/model.bin", 9)}))
      << "file 9 was closed after the removal: it does not hold it back";
}

TEST(DrainPlanTest, ARotatedCheckpointLosesItsMarkerFirst) {
  DrainObservation o = withoutCopies();
  o.maxUploads = 8;
  o.origin = {{"step-1/__0_0.distcp", 1}, {"step-1/.metadata", 2}};
  o.removals = {{"step-1/__0_0.distcp", 9}, {"step-1/.metadata", 9}};
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{removal("step-1/.metadata", 9)});
  o.origin.erase("step-1/.metadata");
  o.removals = {{"step-1/__0_0.distcp", 9}};
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{removal("step-1/__0_0.distcp", 9)});
}

// shutil.rmtree removes a checkpoint's files in directory order, often before its .metadata:
// the marker is still taken down at the origin first.
TEST(DrainPlanTest, ACheckpointWhoseFilesGoBeforeItsMarkerLosesTheMarkerFirstAtTheOrigin) {
  DrainObservation o = withoutCopies();
  o.maxUploads = 8;
  o.origin = {{"step-1/__0_0.distcp", 1},
              {"step-1/__1_0.distcp", 2},
              {"step-1/.metadata", 3},
              {"latest", 4}};
  o.removals = {{"step-1/__0_0.distcp", 9}, {"step-1/__1_0.distcp", 10}};
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{removal("step-1/.metadata", 3)})
      << "once, for both files; `latest` at the root speaks for no file of step-1";
  o.origin.erase("step-1/.metadata");
  o.removals.push_back({"step-1/.metadata", 11});  // seen after the marker was taken down
  const DrainPlan plan = planDrain(o);
  EXPECT_EQ(plan.settled, (std::vector<TreeRemoval>{{"step-1/.metadata", 11}}));
  EXPECT_EQ(atOrigin(plan),
            (std::vector{removal("step-1/__0_0.distcp", 9), removal("step-1/__1_0.distcp", 10)}));
}

// One file of a checkpoint removed, its marker kept: the origin ends as the tree, without ever
// showing the marker beside the file's removal under way.
TEST(DrainPlanTest, AMarkerKeptInTheTreeIsUploadedAgainOnceTheRemovalIsDone) {
  DrainObservation o = withoutCopies();
  o.closed = {{"step-1/.metadata", 3}, {"step-1/b", 2}};
  o.origin = {{"step-1/a", 1}, {"step-1/b", 2}, {"step-1/.metadata", 3}};
  o.removals = {{"step-1/a", 5}};
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{removal("step-1/.metadata", 3)});
  o.origin.erase("step-1/.metadata");
  DrainPlan plan = planDrain(o);
  EXPECT_EQ(atOrigin(plan), std::vector{removal("step-1/a", 5)}) << "the marker waits for it";
  EXPECT_EQ(plan.heldMarkers, 1);
  o.origin.erase("step-1/a");
  o.removals.clear();
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{upload("step-1/.metadata", 3)});
}

TEST(DrainPlanTest, AFileRemovedBeforeItReachedTheOriginIsNeverUploaded) {
  DrainObservation o = withoutCopies();
  o.removals = {{"checkpoint-1/model.bin", 4}};
  o.underway = {upload("checkpoint-1/model.bin", 2)};
  DrainPlan plan = planDrain(o);
  EXPECT_EQ(plan.abandon, std::vector{upload("checkpoint-1/model.bin", 2)});
  EXPECT_TRUE(plan.start.empty());
  EXPECT_TRUE(plan.settled.empty()) << "settled once the abandoned upload has ended";
  o.underway.clear();
  plan = planDrain(o);
  EXPECT_EQ(plan.settled, (std::vector<TreeRemoval>{{"checkpoint-1/model.bin", 4}}));
  EXPECT_TRUE(plan.start.empty()) << "nothing to remove at the origin";
}

TEST(DrainPlanTest, AnAbandonedUploadThatFinishedAnywayIsRemoved) {
  DrainObservation o = withoutCopies();
  o.origin = {{"a.bin", 2}};
  o.removals = {{"a.bin", 4}};
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{removal("a.bin", 4)});
}

// torch.save opens the file with O_TRUNC: while it writes, the version before is not on the
// disk any more.
TEST(DrainPlanTest, AFileBeingWrittenAgainIsNeitherUploadedNorCopied) {
  DrainObservation o;
  o.closed = {{"model.pt", 3}};
  o.writing = {"model.pt"};
  o.underway = {upload("model.pt", 3), copy("model.pt", 3)};
  const DrainPlan plan = planDrain(o);
  EXPECT_EQ(plan.abandon, (std::vector{upload("model.pt", 3), copy("model.pt", 3)}));
  EXPECT_TRUE(plan.start.empty());
}

TEST(DrainPlanTest, ARemovalNeverTakesAPathTheTreeHoldsAgain) {
  DrainObservation o = withoutCopies();
  o.origin = {{"latest", 1}};
  o.closed = {{"latest", 5}};  // deleted at 3, written again at 5
  o.removals = {{"latest", 3}};
  const DrainPlan plan = planDrain(o);
  EXPECT_EQ(plan.settled, (std::vector<TreeRemoval>{{"latest", 3}}));
  EXPECT_EQ(atOrigin(plan), std::vector{upload("latest", 5)});
}

TEST(DrainPlanTest, CopiesEachVersionToPeersOldestFirst) {
  DrainObservation o;
  o.copies = 2;
  o.maxCopies = 2;
  o.origin = {{"a", 1}, {"b", 2}, {"c", 3}};
  o.closed = {{"c", 3}, {"a", 1}, {"b", 2}};
  o.peers = {{"a", {1, 2}}, {"b", {1, 2}}};  // b's peers hold an older version
  EXPECT_EQ(planDrain(o).start, (std::vector{copy("b", 2), copy("c", 3)}));
  o.peers["b"] = {2, 1};
  o.underway = {copy("b", 2)};
  EXPECT_EQ(planDrain(o).start, std::vector{copy("c", 3)});
}

TEST(DrainPlanTest, AMarkerIsCopiedOnlyOnceTheFilesClosedBeforeItAreOnPeers) {
  DrainObservation o;
  o.copies = 1;
  o.maxCopies = 8;
  o.closed = {{"step-10/__0_0.distcp", 1}, {"step-10/.metadata", 2}, {"step-20/__0_0.distcp", 3}};
  EXPECT_EQ(atPeers(planDrain(o)),
            (std::vector{copy("step-10/__0_0.distcp", 1), copy("step-20/__0_0.distcp", 3)}))
      << "a later file does not wait for the marker";
  o.peers = {{"step-10/__0_0.distcp", {1, 1}}};
  o.underway = {copy("step-20/__0_0.distcp", 3)};
  EXPECT_EQ(atPeers(planDrain(o)), std::vector{copy("step-10/.metadata", 2)});
}

TEST(DrainPlanTest, AFileHeldForItsWriterIsNeitherUploadedNorCopiedYetHoldsLaterMarkers) {
  DrainObservation o;
  o.copies = 1;
  o.maxUploads = 8;
  o.closed = {{"step-10/__1_0.distcp", 1, 10},
              {"step-10/__0_0.distcp", 2, 10},
              {"step-10/.metadata", 3, 10}};
  o.held = {"step-10/__1_0.distcp"};  // another node's rank, copied here
  const DrainPlan plan = planDrain(o);
  EXPECT_EQ(atOrigin(plan), std::vector{upload("step-10/__0_0.distcp", 2)})
      << "the marker waits for the held file too: the checkpoint is whole only with it";
  EXPECT_EQ(plan.heldMarkers, 1);
  ASSERT_TRUE(plan.oldestPending);
  EXPECT_EQ(plan.oldestPending->path, "step-10/__0_0.distcp") << "the writer's lag, not ours";
  for (const DrainStep& step : plan.start) EXPECT_NE(step.path, "step-10/__1_0.distcp");
  o.origin = {{"step-10/__1_0.distcp", 1}, {"step-10/__0_0.distcp", 2}};  // the writer's news
  o.held.clear();
  EXPECT_EQ(atOrigin(planDrain(o)), std::vector{upload("step-10/.metadata", 3)});
}

TEST(DrainPlanTest, ARemovalReachesThePeersAtOnceAndTheNextCopyWaitsForIt) {
  DrainObservation o;
  o.copies = 1;
  o.maxUploads = 1;
  // torch.save over model.pt, as safetensors does it: a temp file renamed over the target.
  o.closed = {{"a.bin", 1}, {"model.pt", 4}};
  o.removals = {{"model.pt.tmp", 2}, {"model.pt", 3}};
  o.uncopies = {{"model.pt.tmp", 2}, {"model.pt", 3}};
  const DrainStep uncopyTmp{Kind::kUncopy, "model.pt.tmp", 2};
  const DrainStep uncopyOld{Kind::kUncopy, "model.pt", 3};
  EXPECT_EQ(planDrain(o).start,
            (std::vector{upload("a.bin", 1), uncopyTmp, uncopyOld, copy("a.bin", 1)}))
      << "the new model.pt is not copied while the old one's removal is under way there";
  o.uncopies = {};
  o.underway = {upload("a.bin", 1), copy("a.bin", 1)};
  EXPECT_EQ(planDrain(o).start, std::vector{copy("model.pt", 4)});
}

TEST(DrainPlanTest, EvictsOnlyWhatIsAtTheOriginOldestFirst) {
  DrainObservation o;
  o.closed = {{"new", 9}, {"old", 1}, {"mid", 4}, {"rewritten", 6}, {"copy", 3}, {"open", 2}};
  o.origin = {{"new", 9}, {"old", 1}, {"rewritten", 2}, {"copy", 3}, {"open", 2}};
  o.held = {"copy"};     // held for its writer: not this node's to drop
  o.writing = {"open"};  // being written again
  std::vector<std::string> paths;
  for (const TreeFile& f : evictable(o)) paths.push_back(f.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"old", "new"}));
}

TEST(DrainPlanTest, NamesEachCheckpointAndWhereAllOfItIs) {
  DrainObservation o;
  o.closed = {{"step-1/a", 1, 10},
              {"step-1/b", 2, 20},
              {"step-2/a", 3, 30},
              {"model.pt", 4, 5},
              {"latest", 5, 7}};  // a tracker file names a checkpoint; it is none itself
  o.origin = {{"step-1/a", 1}, {"step-1/b", 2}};
  o.peers = {{"step-1/a", {1, 1}}, {"step-1/b", {2, 1}}, {"step-2/a", {3, 1}}};
  EXPECT_EQ(checkpointsOf(o),
            (std::vector<CheckpointCopies>{
                {.name = "model.pt", .files = 1, .bytes = 5, .newestSeq = 4},
                {.name = "step-2", .files = 1, .bytes = 30, .newestSeq = 3, .onPeer = true},
                {.name = "step-1",
                 .files = 2,
                 .bytes = 30,
                 .newestSeq = 2,
                 .onPeer = true,
                 .atOrigin = true}}));
}

TEST(DrainPlanTest, KnowsTheMarkersOfCommonFrameworks) {
  for (const char* marker : {"step-1/.metadata", ".snapshot_metadata", "ckpt/latest",
                             "latest_checkpointed_iteration.txt", "tf/checkpoint"})
    EXPECT_TRUE(isCompletionMarker(marker)) << marker;
  for (const char* file : {"step-1/.metadata.tmp", "latest.pt", "checkpoint-500/model.bin",
                           "__0_0.distcp", "metadata"})
    EXPECT_FALSE(isCompletionMarker(file)) << file;
}

// A job saving a DCP checkpoint a step (a file a rank, then .metadata), keeping the latest 2,
// against an origin that carries out a random share of the started steps at each turn, in any
// order, while rotations remove a checkpoint's files one by one in any order: at no moment does
// the origin hold a marker without the files it names (after a save, nor during a rotation); at
// the end it holds exactly the tree.
TEST(DrainPlanTest, TheOriginNeverShowsAMarkerBeforeItsFilesAndEndsAsTheTree) {
  std::mt19937 random(5);
  DrainObservation o = withoutCopies();
  o.maxUploads = 3;
  uint64_t seq = 0;
  std::map<std::string, TreeFile> tree;
  const auto observe = [&] {
    o.closed.clear();
    for (const auto& [path, file] : tree) o.closed.push_back(file);
  };
  // What each marker names: the files of its directory when it was closed.
  std::map<std::string, std::vector<std::string>> named;
  const auto checkOrigin = [&] {
    for (const auto& [path, version] : o.origin) {
      if (!isCompletionMarker(path)) continue;
      for (const auto& file : named[path])
        ASSERT_EQ(o.origin.count(file), 1u) << path << "@" << version << " without " << file;
    }
  };
  const auto turn = [&] {
    observe();
    const DrainPlan plan = planDrain(o);
    for (const auto& step : plan.abandon) std::erase(o.underway, step);
    for (const auto& settled : plan.settled) std::erase(o.removals, settled);
    for (const auto& step : plan.start) o.underway.push_back(step);
    std::shuffle(o.underway.begin(), o.underway.end(), random);
    const size_t finish = random() % (o.underway.size() + 1);
    for (size_t i = 0; i < finish; ++i) {
      const DrainStep step = o.underway.back();
      o.underway.pop_back();
      if (step.kind == Kind::kUpload) o.origin[step.path] = step.seq;
      if (step.kind == Kind::kRemove) {
        o.origin.erase(step.path);
        std::erase(o.removals, TreeRemoval{step.path, step.seq});
      }
      checkOrigin();
    }
  };
  for (int step = 1; step <= 30; ++step) {
    const std::string dir = "step-" + std::to_string(step);
    for (int rank = 0; rank < 4; ++rank) {
      const std::string path = dir + "/__" + std::to_string(rank) + "_0.distcp";
      tree[path] = {path, ++seq, 100};
      if (random() % 2) turn();
    }
    tree[dir + "/.metadata"] = {dir + "/.metadata", ++seq, 1};
    for (const auto& [path, file] : tree)
      if (path.starts_with(dir + "/") && !isCompletionMarker(path))
        named[dir + "/.metadata"].push_back(path);
    turn();
    if (step > 2) {  // keep_latest_k = 2, removed as rmtree does: file by file, in any order
      const std::string old = "step-" + std::to_string(step - 2) + "/";
      std::vector<std::string> doomed;
      for (const auto& [path, file] : tree)
        if (path.starts_with(old)) doomed.push_back(path);
      std::shuffle(doomed.begin(), doomed.end(), random);
      for (const std::string& path : doomed) {
        o.removals.push_back({path, ++seq});
        tree.erase(path);
        if (random() % 2) turn();
      }
      turn();
    }
  }
  for (int turns = 0;
       turns < 1000 && !(o.underway.empty() && o.removals.empty() && planDrain(o).start.empty());
       ++turns)
    turn();
  std::map<std::string, uint64_t> expected;
  for (const auto& [path, file] : tree) expected[path] = file.seq;
  EXPECT_EQ(o.origin, expected);
}

}  // namespace
}  // namespace granary::checkpoint
