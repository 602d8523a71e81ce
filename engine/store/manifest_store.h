// The manifest of each dataset generation — every file's path, size, version and mode — in
// RocksDB, so that stat and readdir never touch the origin. Keys group a directory's children
// together: listing a directory is one prefix scan, whatever the dataset's size.
//
// What a listing writes by the million lies apart from the rest, each kind in a column family of
// its own: file entries ("files", in the origin's key order) and the files' inode index
// ("inodes", in counter order). Each family then receives its keys in ascending order, so
// RocksDB moves its flushed tables down the levels without rewriting them; with every kind in
// one family, each flushed table spanned all the older ones and compaction rewrote them again and
// again. Directories, their inodes and the per-generation records stay in the default family,
// as does everything of a store written before the families existed: reads look in both.
//
// Thread-safety: all methods may be called concurrently (RocksDB is thread-safe; puts take
// turns).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/thread_annotations.h"
#include "engine/core/key_range.h"
#include "engine/core/manifest_path.h"
#include "engine/store/store_guard.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Iterator;
class WriteBatch;
}  // namespace rocksdb

namespace granary::cache {

// The dataset root's inode; every other entry gets a stable one when it is listed: files from a
// counter of their generation, in listing order (2, 3, ...), directories above kDirectoryInodes
// (a hash of the path, probed on collision, so that every node of a set numbers them alike).
inline constexpr uint64_t kRootInode = 1;
inline constexpr uint64_t kDirectoryInodes = uint64_t{1} << 63;

struct ManifestEntry {
  std::string path;  // relative to the dataset root, '/'-separated, no leading '/'
  int64_t size = 0;
  std::string etag;  // origin version: ETag, or size and mtime for file origins
  int64_t modifiedUnixNanos = 0;
  // Unique within the generation, stored, and never given to another path of it (not even after
  // drop), so a restarted node answers for inodes a kernel kept and never with another file.
  uint64_t inode = 0;
  uint32_t mode = 0;  // permission bits
  bool directory = false;

  friend bool operator==(const ManifestEntry&, const ManifestEntry&) = default;
};

// A generation whose listing completed, and what it holds.
struct ManifestTotals {
  int64_t files = 0;
  int64_t bytes = 0;
};

// Where a listing from the origins stands: the source it lists (an index), the parts of that
// source's key order still to list, each from the last path of it stored (a part listed whole is
// left out; none: the source is not split yet), and what is stored so far. Stored with each
// batch, so that a listing cut short (a restart, an origin that failed) goes on from there.
struct ListingProgress {
  uint32_t source = 0;
  std::vector<KeyRange> ranges;
  ManifestTotals totals;
};

class ManifestStore {
 public:
  // Opens (creating if needed) the store in `directory`. Unavailable when RocksDB cannot open
  // it (e.g. another process holds its lock).
  static Result<std::unique_ptr<ManifestStore>> open(const std::filesystem::path& directory);
  ~ManifestStore();

  // Writes file entries of one generation ("namespace/name/generation") atomically, together
  // with the directories above them not stored yet. Each file gets the generation's next inode
  // (their `inode` is not read): nothing stored is read for a file, so a path put again holds a
  // new inode, and its old one still leads to it. InvalidArgument for an empty path, a leading
  // '/', or a "." or ".." segment. With `progress`: where the listing stands once these are
  // stored, written with them.
  Status put(std::string_view generation, std::span<const ManifestEntry> files,
             const ListingProgress* progress = nullptr);
  // The progress the last put recorded; NotFound where none did, or the listing completed.
  Result<ListingProgress> progress(std::string_view generation) const;

  // NotFound when the path is not in the manifest; "" is the root directory.
  Result<ManifestEntry> stat(std::string_view generation, std::string_view path) const;

  // The entry holding `inode` (kRootInode: the root). NotFound when none does.
  Result<ManifestEntry> statInode(std::string_view generation, uint64_t inode) const;
  // The direct children of `directory` ("" for the root) in name order, starting after the
  // name `after` (exclusive; "" from the start), at most `limit`.
  Result<std::vector<ManifestEntry>> list(std::string_view generation, std::string_view directory,
                                          std::string_view after = {}, size_t limit = 1000) const;

  // Every file (directories left out) of a generation, in key order, at most `limit` per call.
  // `cursor` starts empty and is advanced past the batch returned; an empty batch is the end.
  Result<std::vector<ManifestEntry>> files(std::string_view generation, std::string& cursor,
                                           size_t limit = 1000) const;

  // Records that the listing of a generation is complete, so a restart does not list again, and
  // forgets its progress.
  Status markComplete(std::string_view generation, ManifestTotals totals);
  // NotFound while the generation's listing is incomplete (or never started).
  Result<ManifestTotals> totals(std::string_view generation) const;

  // The generations whose names start with `prefix` (e.g. "namespace/name/") and whose listing
  // completed, in key order.
  Result<std::vector<std::string>> completedGenerations(std::string_view prefix) const;

  // Removes every entry of a generation, its progress and its completion mark. Its inode
  // counter stays, so that a listing of it again never gives a number a kernel may hold to
  // another path.
  Status drop(std::string_view generation);

 private:
  ManifestStore(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles,
                std::unique_ptr<StoreGuard> guard);
  // The entry stored under `key` (files first, then the default family); NotFound where none.
  Result<ManifestEntry> entryAt(const std::string& key, std::string path) const;
  // Entries of both families from `from` to the end of `prefix` (not empty), in key order.
  class EntryScan;
  std::unique_ptr<EntryScan> scan(const std::string& from, const std::string& prefix) const;
  // Guards a write of about `bytes`.
  Status write(int64_t bytes, const std::function<rocksdb::Status()>& write);
  // The next file inode of `generation`: as stored, or 2 for a generation never put.
  Result<uint64_t> nextInode(std::string_view generation) GRANARY_REQUIRES(putMutex_);
  // The stored value of the file inode group that holds `inode`; "" where none is stored.
  Result<std::string> storedGroup(std::string_view generation, uint64_t inode) const;
  // Adds to `batch` the entries of the directories not stored yet.
  Status addDirectories(std::string_view generation, const std::set<std::string_view>& directories,
                        rocksdb::WriteBatch& batch) const;
  // An inode for the new directory `path`: a hash of it, probed past inodes others hold.
  Result<uint64_t> directoryInode(std::string_view generation, std::string_view path,
                                  std::set<uint64_t>& taken) const;
  std::unique_ptr<rocksdb::DB> db_;
  // The default family's handle, then the files' and the inodes' (the default's again where a
  // store opened read-only lacks them).
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  rocksdb::ColumnFamilyHandle* files_;
  rocksdb::ColumnFamilyHandle* inodes_;
  std::unique_ptr<StoreGuard> guard_;
  // Puts are serialized, so that each writes its generation's counter after any before it.
  Mutex putMutex_;
  std::map<std::string, uint64_t, std::less<>> nextInodes_ GRANARY_GUARDED_BY(putMutex_);
};

}  // namespace granary::cache
