// Cached file data on the node's disks. Large files are stored as chunks, small files whole
// (one chunk). A chunk is written to a temporary name, checksummed (XXH3-64) and renamed into
// place; only then does the index (RocksDB) record it, so a crash leaves either a complete,
// recorded chunk or debris that reconcile() removes. Nothing unverified is ever served.
//
// Chunks are not flushed one by one: a flusher syncs the cache file systems every few seconds
// and then marks the epoch it covered as flushed. Each record carries the epoch it was written
// in, so after a crash reconcile() re-reads only chunks newer than the last flush.
//
// Files fan out over 4,096 hashed sub-directories: no hot directory, and few enough that their
// inodes stay cached (a million chunks is ~250 per directory). Each cache
// directory has a quota; a put that fits none fails with ResourceExhausted and the caller
// evicts. A put also leaves free a twentieth of the directory's file system (at least twice
// StoreGuard's margin, at most 1 GiB), so that chunks never fill the disk the index (RocksDB)
// writes to: a full disk is ResourceExhausted, never a failed index write. Each 64 KiB block of a
// chunk has its own checksum, and every read checks the whole blocks it touches before it returns a
// byte: a damaged chunk is dropped (to be fetched again), never served. reconcile(verifyChecksums)
// checks whole chunks at start-up; openVerified() checks a whole chunk before handing its file
// out. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/owned_fd.h"
#include "common/result.h"
#include "common/thread_annotations.h"
#include "engine/store/store_guard.h"

namespace rocksdb {
class DB;
}

namespace granary::cache {

struct ChunkId {
  std::string generation;  // "namespace/name/generation"
  std::string path;        // file path in the dataset
  int64_t index = 0;       // chunk number within the file

  std::string key() const;  // generation NUL path NUL index, for the index
};

struct CacheDirectory {
  std::filesystem::path path;
  int64_t quotaBytes = 0;
};

struct DirectoryUsage {
  std::filesystem::path path;
  int64_t usedBytes = 0;
  int64_t quotaBytes = 0;
};

// A chunk's file, open for reading, with the checksums the store computed from the very bytes it
// wrote (one per ChunkStore::kChecksumBlock bytes, ChunkStore::blockChecksum).
struct OpenChunk {
  OwnedFd file;
  int64_t size = 0;
  std::vector<uint32_t> checksums;
};

struct ReconcileReport {
  int64_t kept = 0;               // recorded chunks found intact
  int64_t droppedRecords = 0;     // recorded but missing, resized or failing their checksum
  int64_t removedFiles = 0;       // on disk but never recorded (temporary or orphaned)
  int64_t verifiedUnflushed = 0;  // kept after re-reading: written after the last flush
};

class ChunkStore {
 public:
  static constexpr int64_t kChecksumBlock = 64 << 10;
  static constexpr int64_t kMaxKeptFree = int64_t{1} << 30;
  // A directory of each cache directory that the store leaves alone (never swept at open): the
  // node's checkpoint volumes live there, on the same disk as the chunks.
  static constexpr std::string_view kOthersDirectory = "checkpoints";

  // Opens the store: the index in `indexDirectory`, data under `directories` (created if
  // missing), flushed every `flushInterval`. InvalidArgument for no directories or a
  // non-positive quota.
  static Result<std::unique_ptr<ChunkStore>> open(
      const std::filesystem::path& indexDirectory, std::vector<CacheDirectory> directories,
      std::chrono::milliseconds flushInterval = std::chrono::seconds(5));
  ~ChunkStore();  // flushes

  // Makes every chunk recorded so far durable (syncfs on each cache directory), then records
  // that. Unavailable when a sync fails (the chunks stay unflushed).
  Status flush();

  // Stores a chunk (replacing any previous one). ResourceExhausted when no directory has room;
  // Unavailable on I/O errors (nothing is recorded then). Different chunks are written in
  // parallel; callers do not put the same chunk twice at once (they share one fetch).
  Status put(const ChunkId& id, std::string_view data);
  // Records `to` as a second name of chunk `from`'s file (a hard link): the disk holds the bytes
  // once, for as long as either is recorded, and its directory's quota counts them once (removing
  // one name frees nothing while another holds the file). `from` is read and checked first.
  // NotFound when `from` is not recorded; Corruption when it fails its checksums (then dropped);
  // Unavailable when the link fails.
  Status link(const ChunkId& from, const ChunkId& to);
  // Reads `length` bytes from `offset` of a recorded chunk (-1 to its end). NotFound when not
  // cached; Corruption when the file no longer matches its record (the record is dropped).
  Result<std::string> read(const ChunkId& id, int64_t offset = 0, int64_t length = -1);
  // The same into the start of `buffer` (room for `length` bytes at least), past the page
  // cache: for a reader with a page cache of its own (a FUSE mount), so that the node does not
  // hold every byte twice. Direct I/O where the offset and `buffer` are 4 KiB aligned and
  // `buffer` has room for `length` rounded up to 4 KiB; else an ordinary read whose pages are
  // dropped after. Returns the bytes read. Callers bound how many run at once.
  Result<int64_t> readInto(const ChunkId& id, int64_t offset, int64_t length,
                           std::span<char> buffer);
  // The chunk's file, open for reading, for a reader the kernel serves from the file directly
  // (FUSE passthrough), whose bytes this store never sees: sealed (its size and inode change time
  // as when it was put, so written by no one since), else read whole and checked block by block
  // (its pages then stay in the page cache for that reader). NotFound when not cached;
  // Corruption when the file no longer matches its record (the record is dropped). A file
  // damaged after it was opened is not seen: callers check again at each open.
  Result<OwnedFd> openVerified(const ChunkId& id);
  // The same with the chunk's recorded checksums, for a reader elsewhere that checks every byte
  // it receives against them (a peer): a sealed file is handed out unread, its bytes checked at
  // the far end of the wire.
  Result<OpenChunk> openWithChecksums(const ChunkId& id);
  // A block's checksum: the low half of its XXH3-64.
  static uint32_t blockChecksum(const char* data, int64_t length);
  // The checksum of each kChecksumBlock bytes of `data`, as the store records them.
  static std::vector<uint32_t> blockChecksums(std::string_view data);
  bool contains(const ChunkId& id) const;
  Status remove(const ChunkId& id);
  // Calls `each` with every recorded chunk of a generation and its size (to rebuild eviction
  // state at start-up).
  Status forEachChunk(std::string_view generation,
                      const std::function<void(ChunkId&&, int64_t size)>& each) const;
  // Removes every chunk of a generation; returns the bytes freed (not those of chunks another
  // name still holds).
  Result<int64_t> dropGeneration(std::string_view generation);

  // Makes the index and the disks agree (run at start-up): drops records whose file is missing
  // or has the wrong size, or whose checksum fails (checked for chunks written after the last
  // flush, and for all with `verifyChecksums`), and deletes files nobody recorded.
  Result<ReconcileReport> reconcile(bool verifyChecksums);

  std::vector<DirectoryUsage> usage() const;

 private:
  struct BlockRange {
    int64_t start = 0, length = 0;
  };
  struct Record {
    bool known = true;  // false: a record that could not be decoded
    uint32_t directory = 0;
    int64_t size = 0;
    uint64_t epoch = 0;
    std::vector<uint32_t> checksums;  // one per kChecksumBlock bytes
    // The file's inode change time (ns) when it was put, its checksums computed from the very
    // bytes written: a file whose change time is still this was not written since (the kernel
    // gives a change after the time was read a newer one). 0: not known (an older record).
    int64_t sealedChangeTime = 0;

    bool operator==(const Record&) const = default;
    // Whether `blocks`, the chunk's bytes from `start` (a block boundary) on, are intact.
    bool matches(int64_t start, std::string_view blocks) const;
    // The whole blocks around `length` bytes from `offset`.
    BlockRange blocksAround(int64_t offset, int64_t length) const;
  };
  ChunkStore(std::unique_ptr<rocksdb::DB> index, std::unique_ptr<StoreGuard> guard,
             std::vector<CacheDirectory> directories);
  std::filesystem::path fileOf(uint32_t directory, const std::string& key) const;
  Result<Record> recordOf(const std::string& key) const;
  // The record of a chunk to read `length` bytes (-1: to its end) from `offset` of, the length
  // clamped to the chunk. InvalidArgument for an offset beyond it.
  Result<Record> recordForRead(const std::string& key, int64_t offset, int64_t& length) const;
  // Checks a read of whole blocks from `start`; a failed read or a block failing its checksum
  // drops the chunk and becomes Corruption. Where another reader dropped or replaced the chunk
  // since `record` was read, the read is a miss (NotFound): one damage is found once.
  Status verifyRead(const ChunkId& id, const std::string& key, const Record& record,
                    const Status& read, int64_t start, std::string_view blocks);
  // Forgets chunk `key` and removes its file; the bytes freed (0 while another name holds them).
  Result<int64_t> dropLocked(const std::string& key, const Record& record) GRANARY_REQUIRES(mutex_);
  // Bytes a put may still write to a directory's file system, beyond what it keeps free and
  // what puts in flight are writing.
  int64_t diskRoom(uint32_t directory) const GRANARY_REQUIRES(mutex_);
  void flushEvery(std::chrono::milliseconds interval, std::stop_token stop);

  // Guards an index write of about `bytes`.
  Status writeIndex(int64_t bytes, const std::function<rocksdb::Status()>& write);

  std::unique_ptr<rocksdb::DB> index_;
  std::unique_ptr<StoreGuard> guard_;
  std::vector<CacheDirectory> directories_;
  mutable Mutex mutex_;  // also serializes index updates with accounting
  // Bytes on disk per directory, a file with several names once: from the records at open (each
  // name counted), then from the files themselves once reconcile() has run.
  std::vector<int64_t> used_ GRANARY_GUARDED_BY(mutex_);
  // Bytes of puts in flight, per directory.
  std::vector<int64_t> writing_ GRANARY_GUARDED_BY(mutex_);
  std::atomic<uint64_t> epoch_{1};  // the epoch new records are written in
  uint64_t flushedEpoch_ = 0;       // as found at open: records above it are re-read
  std::atomic<bool> unflushed_{false};
  std::jthread flusher_;  // last member: stopped first
};

}  // namespace granary::cache
