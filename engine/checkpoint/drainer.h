// Drains a job's checkpoint tree to its origin in the background: the tree's watch feeds the
// journal, the planner (drain_plan.h) decides, and the drainer carries the steps out, a few at a
// time on threads of their own, under a bandwidth limit. A failed step is tried again after a
// backoff (1 s doubling to 30 s), so an origin that is down delays the drain and loses nothing;
// the drain's record (drain_record.h) is rewritten after each step the origin confirmed, so a
// drainer started again over the same tree uploads nothing twice and carries out the removals
// its predecessor had not.
//
// An upload reads the version the journal names: it checks the local file's identity before it
// reads and again before the upload is made visible at the origin, and gives up (the next close
// reports the new version) when the file changed under it.
//
// With copy targets, each closed file also goes to the peers (copy_targets.h), and they are told
// when it reaches the origin, and at once when it leaves the tree. Other nodes' files copied into
// this tree (peer_copies.h) are held for their writer, who uploads them, until it says they are at
// the origin or is lost (release()). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "engine/checkpoint/copy_targets.h"
#include "engine/checkpoint/drain_plan.h"
#include "engine/checkpoint/origin_writer.h"
#include "engine/checkpoint/tree_journal.h"

namespace granary::checkpoint {

struct DrainerOptions {
  std::filesystem::path tree;           // the volume's directory, as the workers write it
  std::filesystem::path recordFile;     // the drain's record, outside the tree
  int maxUploads = 4;                   // uploads and removals at the origin at once
  int64_t bandwidthBytesPerSecond = 0;  // uploads' share of the origin; 0 unlimited
  std::shared_ptr<CopyTargets> copies;  // none: no copies
  int maxCopies = 4;                    // copies to peers at once
};

struct DrainStatus {
  int64_t files = 0;         // closed files in the tree
  int64_t pendingFiles = 0;  // closed, not at the origin, not held for their writer
  int64_t pendingBytes = 0;
  int64_t heldFiles = 0;  // other nodes' files copied here, which their writers upload
  int64_t pendingRemovals = 0;
  int64_t writing = 0;  // files open for writing
  int heldMarkers = 0;  // completion markers waiting for the files they name
  // The upload lag: how long the oldest closed file not at the origin has waited (0 when none).
  std::chrono::duration<double> lag{0};
  int64_t writtenBytes = 0;   // since start: versions closed in the tree, written here
  int64_t uploadedBytes = 0;  // since start
  int64_t uploadedFiles = 0;
  int64_t copiedBytes = 0;  // since start, to peers (once a file, whatever their number)
  int64_t copiedFiles = 0;
  int64_t removedFiles = 0;
  int64_t failedSteps = 0;
  int64_t evictedFiles = 0;  // since start: dropped here to make room, kept at the origin
  int64_t evictedBytes = 0;
  std::string lastError;  // the last step that failed, "" once one succeeds after it
  std::vector<CheckpointCopies> checkpoints;  // newest first
  std::vector<std::string> links;             // symbolic links in the tree: not drained
  bool drained = false;                       // nothing pending, nothing being written
};

class Drainer {
 public:
  // Reads the record, watches the tree (reporting what it holds now), and starts draining.
  static Result<std::unique_ptr<Drainer>> start(DrainerOptions options,
                                                std::unique_ptr<OriginWriter> origin, Clock& clock);
  virtual ~Drainer() = default;  // stops the steps under way; the record keeps what was done

  virtual DrainStatus status() const = 0;
  // As TreeJournal::listing.
  virtual std::vector<TreeJournal::Listed> listing() const = 0;
  // Makes room on the tree's disk: removes from the tree files whose version the origin holds,
  // oldest first (evictable(), drain_plan.h), until `bytes` are freed or none is left; never a
  // file not at the origin. The bytes freed. The origin keeps them and a restore brings them back.
  virtual int64_t evict(int64_t bytes) = 0;
  // Blocks until the tree is drained (true), or `stop` is requested (false). `progress` is called
  // about once a second meanwhile.
  virtual bool waitDrained(std::stop_token stop,
                           const std::function<void(const DrainStatus&)>& progress) = 0;

  // ---- Other nodes' files copied into the tree: as TreeJournal's methods of those names. ----
  virtual void copyArriving(const std::string& path, const FileIdentity& identity,
                            const std::string& writer, const FileIdentity& source,
                            bool atOrigin) = 0;
  virtual void copyAtOrigin(const std::string& writer, const std::string& path,
                            const FileIdentity& source) = 0;
  virtual std::optional<FileIdentity> copyOf(const std::string& writer, const std::string& path,
                                             bool heldOnly) const = 0;
  virtual void forgetCopy(const std::string& writer, const std::string& path) = 0;
  virtual std::vector<std::string> heldCopies(const std::string& writer) const = 0;
  virtual void release(const std::string& writer) = 0;
};

}  // namespace granary::checkpoint
