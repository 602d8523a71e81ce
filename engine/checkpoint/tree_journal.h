// The state of a job's checkpoint tree as the drain sees it, kept from the changes the tree's
// watch reports (tree_watch.h) and the ends of the drain's steps: each closed file's version
// (numbered by `seq`, the tree's count of changes), the paths being written, the removals not
// yet carried out at the origin, and which version the origin holds of each path. It hands the
// planner its observation (drain_plan.h) and the drain's record (what the origin holds, kept on
// disk so that a restart uploads nothing twice). Pure; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/checkpoint/drain_plan.h"

namespace granary::checkpoint {

// What tells one content of a path from another on the node's disk: a file written again, or
// another file renamed over it, changes at least one of these.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t modifiedNanos = 0;
  friend bool operator==(const FileIdentity&, const FileIdentity&) = default;
};

// A file the origin holds, with the identity of the local file it was uploaded from (or restored
// to).
struct OriginEntry {
  std::string path;
  FileIdentity identity;
  friend bool operator==(const OriginEntry&, const OriginEntry&) = default;
};

class TreeJournal {
 public:
  // Before the watch starts: the origin holds `entries` (the drain's record, or what a restore
  // brought). A file of the tree reported closed with the same identity is at the origin; a
  // recorded path the tree does not hold is a removal still to carry out.
  void recordAtOrigin(const std::vector<OriginEntry>& entries);
  // The scan of the tree after a restart is done: recorded paths not seen are removals.
  void scanDone();

  // ---- Changes of the tree. ----
  // `path` is being written (not closed yet).
  void writing(const std::string& path);
  // `path` was closed after writing, or renamed into place, and is now `identity`. A new
  // version unless it is the version the tree already holds (a rescan seeing the same file).
  // True when the version is one written here: new, not the one the origin holds (a file
  // restored, or drained before a restart), and not another node's copy.
  bool closed(const std::string& path, const FileIdentity& identity, WallTime at);
  // `path` left the tree (deleted, or renamed away); with `directory`, everything below it.
  void removed(const std::string& path, bool directory);
  // `path` is a symbolic link (replacing a file there, if any): not drained, only told
  // (links()).
  void linked(const std::string& path);
  // The node drops `path`, whose version the origin holds, to make room: it leaves the tree
  // without a removal (the origin keeps it) and the record forgets it (a restore brings it back).
  void evicted(const std::string& path);

  // ---- Ends of the drain's steps. ----
  void started(const DrainStep& step);
  // The step succeeded: the origin (or, for a copy, `peers` peers) holds that version, or the
  // path is gone there.
  void finished(const DrainStep& step, int peers = 1);
  // The step failed or was abandoned: no longer under way.
  void ended(const DrainStep& step);
  // Removals the planner found nothing to do for.
  void settle(const std::vector<TreeRemoval>& removals);
  // The peers copies go to changed: no file is on them.
  void forgetCopies() {
    peers_.clear();
    uncopies_.clear();
  }

  // ---- Other nodes' files copied into the tree (peer_copies.h). ----
  // The file `identity` about to be renamed to `path` is `writer`'s version `source`: held (not
  // uploaded, not copied on) while its writer uploads it, unless `atOrigin` says it is there.
  void copyArriving(const std::string& path, const FileIdentity& identity,
                    const std::string& writer, const FileIdentity& source, bool atOrigin);
  // `writer` put its version `source` of `path` at the origin: the copy of it here is there.
  void copyAtOrigin(const std::string& writer, const std::string& path, const FileIdentity& source);
  // The identity of the copy of `writer`'s `path` the tree holds now, if any; only one still held
  // for its writer when `heldOnly`.
  std::optional<FileIdentity> copyOf(const std::string& writer, const std::string& path,
                                     bool heldOnly) const;
  // The copy of `writer`'s `path` is about to be removed by its writer's word: held (not uploaded)
  // until then, and the origin's version of it the writer's to remove, not this node's.
  void forgetCopy(const std::string& writer, const std::string& path);
  // The tree's closed files not being written again, with their identity and whether the origin
  // holds that version: what a restore on another node may read here.
  struct Listed {
    std::string path;
    FileIdentity identity;
    bool atOrigin = false;
  };
  std::vector<Listed> listing() const;
  // Paths of the copies of `writer`'s files the tree holds now, held ones only.
  std::vector<std::string> heldCopies(const std::string& writer) const;
  // `writer` is lost: the copies of its files held here are uploaded from here.
  void release(const std::string& writer);

  // What the planner decides from. `copies`, `maxUploads` and `maxCopies` are the drain's
  // settings.
  DrainObservation observe(int copies, int maxUploads, int maxCopies) const;
  // The identity of the version `seq` of `path`, nullopt when the tree no longer holds it.
  std::optional<FileIdentity> identity(const std::string& path, uint64_t seq) const;
  // Whether the origin holds the version `seq` of `path`.
  bool isAtOrigin(const std::string& path, uint64_t seq) const;
  // The drain's record: every path the origin holds, with the identity it was uploaded from.
  std::vector<OriginEntry> record() const;
  // Whether anything is pending: a closed file not at the origin (held ones included), a removal
  // not carried out, a file being written.
  bool drained() const;
  // The symbolic links the tree holds, which the drain leaves out.
  const std::set<std::string>& links() const { return links_; }

 private:
  struct Version {
    TreeFile file;
    FileIdentity identity;
  };
  struct AtOrigin {
    uint64_t seq = 0;  // 0: a version from before the restart, not (or no longer) in the tree
    FileIdentity identity;
  };

  uint64_t seq_ = 0;
  std::map<std::string, Version> files_;
  std::set<std::string> writing_;
  std::set<std::string> links_;
  std::vector<TreeRemoval> removals_;
  std::vector<TreeRemoval> uncopies_;  // paths removed here still on the peers
  std::map<std::string, AtOrigin> origin_;
  std::map<std::string, std::pair<uint64_t, int>> peers_;
  struct Copy {
    std::string writer;
    FileIdentity here, source;
    bool held = true;
  };
  std::map<std::string, Copy> copies_;  // by path; current while `here` is the tree's version
  bool isHeld(const std::string& path, const Version& version) const;
  std::vector<DrainStep> underway_;
  bool scanning_ = false;  // between recordAtOrigin() and scanDone()
};

}  // namespace granary::checkpoint
