// What the drain of a job's checkpoint tree does next: which closed files to copy to a peer,
// which to upload to the origin or remove there, in which order, and which the node may evict.
// Decided from what the tree holds and where each file's copies are; the drainer carries the
// steps out and observes again. Pure; not thread-safe.
//
// The promises it keeps:
//  - oldest first: files go to the origin in the order they were closed, a few at a time;
//  - a file that marks a checkpoint complete (isCompletionMarker) goes only once every file
//    closed before it (or renamed into place with it) is at the origin, and every file it speaks
//    for too (closed later as far as the tree tells, or still being written);
//  - a removal (a delete, or the old path of a rename) goes only once every file closed before it
//    is at the origin, and never removes a path the tree holds again;
//  - a file a marker at the origin speaks for (one of the marker's directory or below it; for a
//    marker at the tree's root, of the root itself) is removed there only once the marker is
//    gone: the marker is taken down first, whatever order the tree lost them in, and uploaded
//    again, if the tree still holds it, once the removals it speaks for are done. A rotated
//    checkpoint never looks complete at the origin without its data;
//  - a file removed or written again before it reached the origin is never uploaded as it was:
//    a step under way for a version the tree no longer holds is abandoned;
//  - a file being written is neither copied nor uploaded;
//  - a marker is copied to peers only once every file closed before it is on them, so that a
//    peer's tree never looks complete before the writer's does;
//  - a path removed from the tree is removed from the peers at once (no order at the origin
//    holds it back), and copied there again only once that removal is done;
//  - a file held for its writer (a peer's copy, which the writer uploads) is neither uploaded
//    nor copied on, and counts as not at the origin for the markers and removals after it;
//  - only a file whose version is at the origin may be evicted.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace granary::checkpoint {

using WallTime = std::chrono::system_clock::time_point;

// A closed version of a file of the tree. `seq` orders the changes made to the tree (closes,
// removals, renames) and only grows; a file renamed into place is a new version at the
// rename's seq.
struct TreeFile {
  std::string path;  // below the tree's root
  uint64_t seq = 0;
  int64_t size = 0;
  WallTime closedAt{};
};

// A path taken out of the tree at `seq`: deleted, or the old name of a rename.
struct TreeRemoval {
  std::string path;
  uint64_t seq = 0;
  friend bool operator==(const TreeRemoval&, const TreeRemoval&) = default;
};

struct DrainStep {
  // kUncopy: removes a path from the peers.
  enum class Kind { kCopy, kUpload, kRemove, kUncopy };
  Kind kind = Kind::kUpload;
  std::string path;
  uint64_t seq = 0;  // the version copied or uploaded; the removal's seq
  friend bool operator==(const DrainStep&, const DrainStep&) = default;
  friend std::ostream& operator<<(std::ostream& out, const DrainStep& step);
};

struct DrainObservation {
  std::vector<TreeFile> closed;            // the tree's closed files, one version each
  std::set<std::string> writing;           // paths open for writing now
  std::vector<TreeRemoval> removals;       // not yet carried out at the origin
  std::vector<TreeRemoval> uncopies;       // paths on peers removed since, not yet there
  std::map<std::string, uint64_t> origin;  // path -> the seq of the version the origin holds
  // path -> the seq of the version on peers, and how many peers hold it.
  std::map<std::string, std::pair<uint64_t, int>> peers;
  std::vector<DrainStep> underway;  // started and not yet ended
  // Paths whose version here is another node's file, copied here, that its writer uploads.
  std::set<std::string> held;
  int copies = 1;      // peer copies wanted of each file (0: none)
  int maxUploads = 4;  // uploads and removals at the origin at once
  int maxCopies = 4;   // copies to peers at once
};

struct DrainPlan {
  std::vector<DrainStep> start;    // to start now, in this order
  std::vector<DrainStep> abandon;  // under way for a version the tree no longer holds: stop them
  // Removals with nothing to do at the origin (the path never reached it, or the tree holds it
  // again): done.
  std::vector<TreeRemoval> settled;
  // The oldest closed file not yet at the origin, held ones left out (the upload lag is its
  // age).
  std::optional<TreeFile> oldestPending;
  // Files whose markers wait for earlier files, for status: how many.
  int heldMarkers = 0;
};

// Whether a file's name marks a checkpoint complete for the frameworks that read it back:
// PyTorch Distributed Checkpoint's ".metadata", torchsnapshot's ".snapshot_metadata",
// Megatron's "latest_checkpointed_iteration.txt", DeepSpeed's and others' "latest", TensorFlow's
// "checkpoint".
bool isCompletionMarker(std::string_view path);

DrainPlan planDrain(const DrainObservation& observation);

// Closed files the node may drop to make room: those whose version is at the origin, oldest
// first; never one that is not, nor one held for its writer or being written.
std::vector<TreeFile> evictable(const DrainObservation& observation);

// One checkpoint of the tree (a top-level directory, or a top-level file other than a marker
// such as `latest`, which names one) and where all of its files' current versions are.
struct CheckpointCopies {
  std::string name;
  int64_t files = 0;
  int64_t bytes = 0;
  uint64_t newestSeq = 0;
  bool onPeer = false;    // every file on at least one peer
  bool atOrigin = false;  // every file at the origin
  friend bool operator==(const CheckpointCopies&, const CheckpointCopies&) = default;
};

// The tree's checkpoints, newest (by their newest file) first.
std::vector<CheckpointCopies> checkpointsOf(const DrainObservation& observation);

}  // namespace granary::checkpoint
