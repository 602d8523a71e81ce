// The changes of a checkpoint tree as they happen, from inotify(7): each directory of the tree is
// watched, a directory created or moved in is watched and scanned at once (files written into it
// before its watch was added are reported by the scan, in the order they were likely closed: by
// modification time, completion markers last), and a lost event (the kernel's queue
// overflowed) makes a rescan of the whole tree. Regular files, and symbolic links (reported as
// such, for the status: the drain leaves them out); devices and sockets are not reported.
//
// What is reported, relative to the root, '/'-separated:
//   - writing: a file was written to and not closed since;
//   - closed: a file written was closed, a file was renamed or moved into the tree, or a scan
//     found it (with its identity: a scan of a file the tree already knows reports it again);
//   - removed: a file or directory was deleted, or renamed or moved out of the tree;
//   - link: a symbolic link was made, moved into the tree, or found by a scan;
//   - rescanned: after a rescan, every regular file and link the tree holds (those missing were
//     removed).
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/checkpoint/tree_journal.h"

namespace granary::checkpoint {

struct TreeEvent {
  enum class Kind { kWriting, kClosed, kRemoved, kLink, kRescanned };
  Kind kind = Kind::kClosed;
  std::string path;
  bool directory = false;     // kRemoved: everything below `path` went too
  FileIdentity identity;      // kClosed
  std::set<std::string> all;  // kRescanned
};

// The identity a stat(2) of a file reports.
FileIdentity identityOf(const struct stat& st);
// The identity of the regular file at `path` (lstat, no symlink followed); nullopt when there is
// none (gone, or not a regular file).
std::optional<FileIdentity> identityOf(const std::filesystem::path& path);

class TreeWatch {
 public:
  using Sink = std::function<void(std::vector<TreeEvent>&&)>;

  // Watches `root` (a directory), reports every regular file it holds now as closed, then
  // reports changes to `sink` from a thread of its own until destroyed. Unavailable when inotify
  // cannot watch (the node's fs.inotify.max_user_watches or max_user_instances reached: the
  // message names the setting).
  static Result<std::unique_ptr<TreeWatch>> start(const std::filesystem::path& root, Sink sink);

  virtual ~TreeWatch() = default;
};

}  // namespace granary::checkpoint
