// RocksDB must never meet a full disk: after a failed write it refuses every later one, and the
// build Debian ships aborts when such a database is closed. The stores send each write through
// a StoreGuard, which first checks the free space of the database's file system and refuses the
// write (ResourceExhausted) while less than kMarginBytes would remain: enough for RocksDB's log
// and a memtable flush. A database that failed a write anyway, or whose disk is short when it
// is done with, is not closed (its owner abandons it): RocksDB recovers from its log at the
// next open, as after a crash.
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
struct Options;
class Status;
}  // namespace rocksdb

namespace granary::cache {

class StoreGuard {
 public:
  static constexpr int64_t kMarginBytes = int64_t{32} << 20;

  StoreGuard(std::filesystem::path directory, std::string what)
      : directory_(std::move(directory)), what_(std::move(what)) {}

  // Opens the database at the guarded directory; where the disk is too full to open it for
  // writing, opens it read-only, and every write is then refused: the node serves what it holds.
  Status open(const rocksdb::Options& options, rocksdb::DB** db);
  // The same, with column families besides the default one, each with `options` (created where
  // missing); `handles` gets the default family's handle, then each of `families`' in order, for
  // the caller to destroy before closing. A store opened read-only that lacks a family (written
  // before it existed) gets the default family's handle in its place, so reads look there.
  Status open(const rocksdb::Options& options, const std::vector<std::string>& families,
              rocksdb::DB** db, std::vector<rocksdb::ColumnFamilyHandle*>& handles);

  // OK when `bytes` more fit with the margin left; ResourceExhausted naming the file system.
  Status admit(int64_t bytes) const;
  // The outcome of a write: an I/O error is remembered (see failed()) and becomes Unavailable
  // (ResourceExhausted when the disk is full); NotFound stays NotFound.
  Status check(const rocksdb::Status& written);
  // Whether the database must not be closed: it is writable and a write failed, or the disk is
  // short now (closing writes, and a write that fails while closing aborts). A read-only
  // database writes nothing and is always closed.
  bool keepOpen() const { return !readOnly_ && (failed_.load() || !admit(0).isOk()); }

  // Keeps `db` open and reachable, never closed, until the process exits.
  static void abandon(std::unique_ptr<rocksdb::DB> db);

 private:
  std::filesystem::path directory_;
  std::string what_;
  std::atomic<bool> failed_{false};
  bool readOnly_ = false;
};

}  // namespace granary::cache
