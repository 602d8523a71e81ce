// The receiving side of copy_targets.h: another node's closed files placed into this node's
// checkpoint tree of the same volume, whole or not at all, and held for their writer, who uploads
// them (drainer.h), until it says they are at the origin or is lost. The workers of this node see
// them like files written here; a file written here since a copy came is never replaced or
// removed by the copy's writer.
//
// That a copy is held is kept in memory only: a drain started again over the tree (the node
// restarted) takes the copies it holds for files to upload, as if their writers were lost, which
// costs an upload and never a byte.
//
// Paths come from another node: each is checked (relative, no "." or ".." segment), and no
// directory of the tree on the way to it may be a symbolic link, so that a copy never lands
// outside the tree.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

#include "common/result.h"
#include "engine/checkpoint/drainer.h"
#include "engine/checkpoint/restore.h"

namespace granary::checkpoint {

struct PeerCopy {
  std::string writer;   // the node that wrote it
  std::string path;     // below the tree's root
  FileIdentity source;  // its version on the writer's node
  bool atOrigin = false;
};

struct CopyPlaces {
  std::filesystem::path tree;
  std::filesystem::path staging;  // on the tree's file system, outside it
};

// Stages the copy in `places.staging`, where `fill` writes the file's bytes to `fd` and checks
// them (its error ends the copy, nothing of it placed); syncs it, gives it the writer's
// modification time, enters it with `drainer`, and renames it to its path in the tree. OK without
// placing it when the tree's file there is newer than the copy. InvalidArgument for a path that
// leaves the tree.
Status placeCopy(const CopyPlaces& places, Drainer& drainer, const PeerCopy& copy,
                 const std::function<Status(int fd)>& fill);

// Removes the tree's copy of `writer`'s `path` while it is the one placed, and the directories
// this leaves empty.
Status removeCopy(const std::filesystem::path& tree, Drainer& drainer, const std::string& writer,
                  const std::string& path);

// Reads `file` of the tree for another node's restore, handing `each` the bytes in order;
// FailedPrecondition when the tree holds another version of it (size or modification time),
// InvalidArgument for a path that leaves the tree.
Status readTreeFile(const std::filesystem::path& tree, const PeerFile& file,
                    const std::function<Status(std::string_view bytes)>& each);

// Removes every copy of `writer`'s files still held here (the writer no longer copies here).
Status dropHeldCopies(const std::filesystem::path& tree, Drainer& drainer,
                      const std::string& writer);

}  // namespace granary::checkpoint
