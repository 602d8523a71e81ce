#include "engine/store/chunk_store.h"

#include <fcntl.h>
#include <rocksdb/db.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include "common/log.h"
#include "common/xxh3.h"
#include "engine/store/rocksdb_options.h"

namespace granary::cache {
namespace {

constexpr const char* kSuffix = ".chunk";
constexpr const char* kTemporarySuffix = ".tmp";
constexpr int64_t kReadAhead = 8 << 20;
// How much of a chunk openVerified() reads and checks at once: whole checksum blocks.
constexpr int64_t kVerifyPiece = 16 * ChunkStore::kChecksumBlock;
constexpr int64_t kChecksumBlock = ChunkStore::kChecksumBlock;

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Record: directory, size, flush epoch, one checksum per block, then the file's sealed change
// time (host byte order: it never leaves the node). Records without the change time (an older
// format) are read as unsealed; a record of any other length is not trusted.
constexpr size_t kRecordHeader = 4 + 8 + 8;
constexpr size_t kRecordSeal = 8;

int64_t blockCount(int64_t size) { return (size + kChecksumBlock - 1) / kChecksumBlock; }
size_t unsealedRecordSize(int64_t size) {
  return kRecordHeader + 4 * static_cast<size_t>(blockCount(size));
}
size_t recordSize(int64_t size) { return unsealedRecordSize(size) + kRecordSeal; }

int64_t changeTimeOf(const struct stat& st) {
  return static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
}

std::string encode(uint32_t directory, std::string_view data, uint64_t epoch,
                   int64_t sealedChangeTime) {
  const auto size = static_cast<int64_t>(data.size());
  std::string v(recordSize(size), '\0');
  std::memcpy(v.data() + unsealedRecordSize(size), &sealedChangeTime, kRecordSeal);
  std::memcpy(v.data(), &directory, 4);
  std::memcpy(v.data() + 4, &size, 8);
  std::memcpy(v.data() + 12, &epoch, 8);
  const std::vector<uint32_t> sums = ChunkStore::blockChecksums(data);
  std::memcpy(v.data() + kRecordHeader, sums.data(), 4 * sums.size());
  return v;
}

// The size a well-formed record holds, or -1.
int64_t recordedSize(std::string_view value) {
  if (value.size() < kRecordHeader) return -1;
  int64_t size;
  std::memcpy(&size, value.data() + 4, 8);
  return size >= 0 && (value.size() == recordSize(size) || value.size() == unsealedRecordSize(size))
             ? size
             : -1;
}

// The last epoch whose chunks are known to be on the disk. Chunk keys start with a generation,
// never with NUL.
const std::string kFlushedKey = std::string(1, '\0') + "flushed-epoch";

bool isChunkKey(std::string_view key) { return !key.empty() && key.front() != '\0'; }

Status fromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::ok();
  if (s.IsNotFound()) return notFound(what + ": not found");
  return unavailable(what + ": " + s.ToString());
}

// Writes `data` to `path` (the flusher makes it durable later). Unavailable on any error;
// ResourceExhausted when the disk is full.
Status writeFile(const std::filesystem::path& path, std::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return unavailable("cannot create " + path.string() + ": " + std::strerror(errno));
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = ::write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return error == ENOSPC
                 ? Status(StatusCode::kResourceExhausted, path.string() + ": disk full")
                 : unavailable("cannot write " + path.string() + ": " + std::strerror(error));
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0)
    return unavailable("cannot close " + path.string() + ": " + std::strerror(errno));
  return Status::ok();
}

// Reads up to `length` bytes from `offset` of `fd` into `into`; the bytes read (short at the
// end of the file), or -1 on an error.
int64_t readFully(int fd, char* into, int64_t length, int64_t offset) {
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, into + done, static_cast<size_t>(length - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += n;
  }
  return done;
}

// Reads `length` bytes from `offset`. With `readAhead`, the kernel starts reading that many
// bytes past them in the background: each read opens the file afresh, so the kernel's own
// sequential readahead never builds up.
Result<std::string> readFile(const std::filesystem::path& path, int64_t offset, int64_t length,
                             int64_t readAhead = 0) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return notFound(path.string() + " is missing");
  if (readAhead > 0) ::posix_fadvise(fd, offset + length, readAhead, POSIX_FADV_WILLNEED);
  std::string data(static_cast<size_t>(length), '\0');
  const int64_t done = readFully(fd, data.data(), length, offset);
  ::close(fd);
  if (done != length) return corruption(path.string() + " is shorter than recorded");
  return data;
}

// Reads `length` bytes from `offset` into `buffer` past the page cache: direct I/O where the
// alignment allows (a virtual disk then reads into the caller's memory in one go), else an
// ordinary read with the pages dropped after.
Status readUncached(const std::filesystem::path& path, int64_t offset, int64_t length,
                    std::span<char> buffer) {
  constexpr int64_t kAlignment = 4096;
  const int64_t rounded = (length + kAlignment - 1) / kAlignment * kAlignment;
  if (offset % kAlignment == 0 && reinterpret_cast<uintptr_t>(buffer.data()) % kAlignment == 0 &&
      rounded <= static_cast<int64_t>(buffer.size())) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd >= 0) {
      const int64_t done = readFully(fd, buffer.data(), rounded, offset);
      ::close(fd);
      if (done >= length) return Status::ok();
    }  // else: no direct I/O on this file system, or short: read it the ordinary way
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return notFound(path.string() + " is missing");
  const int64_t done = readFully(fd, buffer.data(), length, offset);
  ::posix_fadvise(fd, offset, length, POSIX_FADV_DONTNEED);
  ::close(fd);
  if (done != length) return corruption(path.string() + " is shorter than recorded");
  return Status::ok();
}

}  // namespace

std::string ChunkId::key() const {
  std::string k = generation;
  k += '\0';
  k += path;
  k += '\0';
  k += std::to_string(index);
  return k;
}

ChunkStore::ChunkStore(std::unique_ptr<rocksdb::DB> index, std::unique_ptr<StoreGuard> guard,
                       std::vector<CacheDirectory> directories)
    : index_(std::move(index)),
      guard_(std::move(guard)),
      directories_(std::move(directories)),
      used_(directories_.size(), 0),
      writing_(directories_.size(), 0) {}

ChunkStore::~ChunkStore() {
  if (flusher_.joinable()) {
    flusher_.request_stop();
    flusher_.join();
  }
  if (const Status flushed = flush(); !flushed.isOk())
    Logger("cache").warn("final flush failed", {{"error", flushed}});
  if (guard_->keepOpen()) StoreGuard::abandon(std::move(index_));  // closing would abort
}

Status ChunkStore::writeIndex(int64_t bytes, const std::function<rocksdb::Status()>& write) {
  GRANARY_RETURN_IF_ERROR(guard_->admit(bytes));
  return guard_->check(write());
}

Status ChunkStore::flush() {
  if (!unflushed_.exchange(false)) return Status::ok();
  const uint64_t epoch = epoch_.fetch_add(1);  // chunks recorded from now on are in the next one
  for (const auto& d : directories_) {
    const int fd = ::open(d.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const bool synced = fd >= 0 && ::syncfs(fd) == 0;
    const int error = errno;
    if (fd >= 0) ::close(fd);
    if (!synced) {
      unflushed_ = true;
      return unavailable("cannot flush " + d.path.string() + ": " + std::strerror(error));
    }
  }
  std::string value(8, '\0');
  std::memcpy(value.data(), &epoch, 8);
  rocksdb::WriteOptions durable;
  durable.sync = true;
  GRANARY_RETURN_IF_ERROR(writeIndex(64, [&] { return index_->Put(durable, kFlushedKey, value); }));
  return Status::ok();
}

void ChunkStore::flushEvery(std::chrono::milliseconds interval, std::stop_token stop) {
  std::mutex idle;
  std::condition_variable_any wake;
  std::unique_lock lock(idle);
  while (true) {
    wake.wait_for(lock, stop, interval, [] { return false; });  // sleeps until stopped
    if (stop.stop_requested()) return;
    if (const Status flushed = flush(); !flushed.isOk())
      Logger("cache").warn("flush failed; retrying", {{"error", flushed}});
  }
}

Result<std::unique_ptr<ChunkStore>> ChunkStore::open(const std::filesystem::path& indexDirectory,
                                                     std::vector<CacheDirectory> directories,
                                                     std::chrono::milliseconds flushInterval) {
  if (directories.empty()) return invalidArgument("cache directories: name at least one");
  for (const auto& d : directories) {
    if (d.quotaBytes <= 0) {
      return invalidArgument("cache directory " + d.path.string() + ": quota must be above zero");
    }
    std::error_code error;
    std::filesystem::create_directories(d.path, error);
    if (error) return unavailable("cannot create " + d.path.string() + ": " + error.message());
  }
  const rocksdb::Options options = storeOptions();
  std::error_code created;
  std::filesystem::create_directories(indexDirectory, created);
  auto guard = std::make_unique<StoreGuard>(indexDirectory, "chunk index");
  rocksdb::DB* raw = nullptr;
  GRANARY_RETURN_IF_ERROR(guard->open(options, &raw));
  std::unique_ptr<ChunkStore> store(
      new ChunkStore(std::unique_ptr<rocksdb::DB>(raw), std::move(guard), std::move(directories)));
  // Usage and the newest epoch from the records; the last flushed epoch from its mark.
  std::string flushed;
  if (store->index_->Get(rocksdb::ReadOptions(), kFlushedKey, &flushed).ok() &&
      flushed.size() == 8) {
    std::memcpy(&store->flushedEpoch_, flushed.data(), 8);
  }
  uint64_t newest = store->flushedEpoch_;
  std::vector<int64_t> used(store->directories_.size(), 0);
  std::unique_ptr<rocksdb::Iterator> it(store->index_->NewIterator(scanOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const auto value = it->value().ToStringView();
    const int64_t size = recordedSize(value);
    if (!isChunkKey(it->key().ToStringView()) || size < 0) continue;
    uint32_t directory;
    uint64_t epoch;
    std::memcpy(&directory, value.data(), 4);
    std::memcpy(&epoch, value.data() + 12, 8);
    if (directory < used.size()) used[directory] += size;
    newest = std::max(newest, epoch);
  }
  {
    MutexLock lock(store->mutex_);
    store->used_ = std::move(used);
  }
  store->epoch_ = newest + 1;
  store->flusher_ = std::jthread([raw = store.get(), flushInterval](std::stop_token stop) {
    raw->flushEvery(flushInterval, stop);
  });
  return store;
}

// The chunks of the files of one dataset directory share a sub-directory (named by a hash of
// generation and directory), so that the file system keeps their inodes together as it does the
// dataset's own: a reader going through a directory reads a few inode blocks, not one per file.
// The file's name hashes the whole key.
std::filesystem::path ChunkStore::fileOf(uint32_t directory, const std::string& key) const {
  const size_t pathStart = key.find('\0') + 1, pathEnd = key.rfind('\0');
  const size_t slash = key.rfind('/', pathEnd);
  const size_t groupEnd = slash == std::string::npos || slash < pathStart ? pathStart : slash;
  const std::string group = hex64(XXH3_64bits(key.data(), groupEnd));
  const std::string name = hex64(XXH3_64bits(key.data(), key.size()));
  return directories_[directory].path / group.substr(0, 4) / (name + kSuffix);
}

Result<ChunkStore::Record> ChunkStore::recordOf(const std::string& key) const {
  std::string value;
  const rocksdb::Status s = index_->Get(rocksdb::ReadOptions(), key, &value);
  if (s.IsNotFound()) return notFound("chunk is not cached");
  GRANARY_RETURN_IF_ERROR(fromRocks(s, "chunk index"));
  if (recordedSize(value) < 0) return corruption("chunk record has the wrong size");
  Record r;
  std::memcpy(&r.directory, value.data(), 4);
  std::memcpy(&r.size, value.data() + 4, 8);
  std::memcpy(&r.epoch, value.data() + 12, 8);
  r.checksums.resize(static_cast<size_t>(blockCount(r.size)));
  std::memcpy(r.checksums.data(), value.data() + kRecordHeader, 4 * r.checksums.size());
  if (value.size() == recordSize(r.size))
    std::memcpy(&r.sealedChangeTime, value.data() + unsealedRecordSize(r.size), kRecordSeal);
  if (r.directory >= directories_.size())
    return corruption("chunk record names an unknown directory");
  return r;
}

Result<int64_t> ChunkStore::dropLocked(const std::string& key, const Record& record) {
  GRANARY_RETURN_IF_ERROR(
      writeIndex(64, [&] { return index_->Delete(rocksdb::WriteOptions(), key); }));
  const std::filesystem::path file = fileOf(record.directory, key);
  struct stat st {};
  // The bytes stay on disk while another name (a link) holds them.
  const bool last = ::stat(file.c_str(), &st) != 0 || st.st_nlink <= 1;
  if (last) used_[record.directory] -= record.size;
  std::error_code ignored;  // a missing file is what we wanted anyway
  std::filesystem::remove(file, ignored);
  return last ? record.size : 0;
}

Status ChunkStore::put(const ChunkId& id, std::string_view data) {
  const std::string key = id.key();
  const auto size = static_cast<int64_t>(data.size());
  uint32_t chosen = 0;
  {
    // Under the lock: drop the old copy and reserve room in the directory with the most of it.
    // The file I/O below runs unlocked, so chunks are written in parallel.
    MutexLock lock(mutex_);
    if (auto old = recordOf(key); old.isOk())
      GRANARY_RETURN_IF_ERROR(dropLocked(key, *old).status());
    int64_t bestRoom = -1;
    bool diskFull = false;
    for (uint32_t d = 0; d < directories_.size(); ++d) {
      const int64_t room = directories_[d].quotaBytes - used_[d];
      if (room < size || room <= bestRoom) continue;
      if (diskRoom(d) < size) {
        diskFull = true;
        continue;
      }
      bestRoom = room, chosen = d;
    }
    if (bestRoom < 0) {
      return {StatusCode::kResourceExhausted,
              diskFull ? "disk full: no cache directory's file system has room for " +
                             std::to_string(size) + " bytes beyond what it keeps free"
                       : "no cache directory has room for " + std::to_string(size) +
                             " bytes; evict first"};
    }
    used_[chosen] += size;
    writing_[chosen] += size;
  }
  const auto unreserve = [&] {
    MutexLock lock(mutex_);
    used_[chosen] -= size;
  };
  struct Written {  // the bytes leave writing_ once they are on the disk (or not)
    ChunkStore& store;
    uint32_t directory;
    int64_t size;
    ~Written() {
      MutexLock lock(store.mutex_);
      store.writing_[directory] -= size;
    }
  } inFlight{*this, chosen, size};
  const std::filesystem::path target = fileOf(chosen, key);
  const std::filesystem::path temporary = target.string() + kTemporarySuffix;
  std::error_code error;
  std::filesystem::create_directories(target.parent_path(), error);
  Status written =
      error ? unavailable("cannot create " + target.parent_path().string() + ": " + error.message())
            : writeFile(temporary, data);
  if (written.isOk()) {
    std::filesystem::rename(temporary, target, error);
    if (error) written = unavailable("cannot rename into " + target.string());
  }
  if (written.isOk()) {
    // The epoch is read after the data is written: a flush that starts later covers it.
    const uint64_t epoch = epoch_.load();
    struct stat st {};
    const int64_t sealed = ::stat(target.c_str(), &st) == 0 ? changeTimeOf(st) : 0;
    written = writeIndex(256, [&] {
      return index_->Put(rocksdb::WriteOptions(), key, encode(chosen, data, epoch, sealed));
    });
    unflushed_ = true;
    if (!written.isOk()) std::filesystem::remove(target, error);
  }
  if (!written.isOk()) {
    std::filesystem::remove(temporary, error);
    unreserve();
  }
  return written;
}

Status ChunkStore::link(const ChunkId& from, const ChunkId& to) {
  GRANARY_ASSIGN_OR_RETURN(const std::string data, read(from));
  const std::string fromKey = from.key(), toKey = to.key();
  const auto size = static_cast<int64_t>(data.size());
  MutexLock lock(mutex_);
  GRANARY_ASSIGN_OR_RETURN(const Record source, recordOf(fromKey));  // evicted since: NotFound
  if (source.size != size) return notFound("chunk " + fromKey + " was replaced");
  if (auto old = recordOf(toKey); old.isOk())
    GRANARY_RETURN_IF_ERROR(dropLocked(toKey, *old).status());
  const uint32_t directory = source.directory;  // a link stays on its file system
  const std::filesystem::path original = fileOf(directory, fromKey);
  const std::filesystem::path target = fileOf(directory, toKey);
  std::error_code error;
  std::filesystem::create_directories(target.parent_path(), error);
  if (error || ::link(original.c_str(), target.c_str()) != 0)
    return unavailable("cannot link " + original.string() + " to " + target.string());
  // A link changes the inode's change time: both records are sealed anew, with the checksums
  // of the bytes just checked.
  const uint64_t epoch = epoch_.load();
  struct stat st {};
  const int64_t sealed = ::stat(target.c_str(), &st) == 0 ? changeTimeOf(st) : 0;
  Status written = writeIndex(512, [&] {
    rocksdb::WriteBatch batch;
    batch.Put(toKey, encode(directory, data, epoch, sealed));
    batch.Put(fromKey, encode(directory, data, epoch, sealed));
    return index_->Write(rocksdb::WriteOptions(), &batch);
  });
  if (!written.isOk()) {
    std::filesystem::remove(target, error);
    return written;
  }
  unflushed_ = true;  // no bytes more on disk: the quota counts them once
  return Status::ok();
}

Result<ChunkStore::Record> ChunkStore::recordForRead(const std::string& key, int64_t offset,
                                                     int64_t& length) const {
  GRANARY_ASSIGN_OR_RETURN(Record record, recordOf(key));
  if (offset < 0 || offset > record.size) return invalidArgument("offset beyond the chunk");
  if (length < 0 || offset + length > record.size) length = record.size - offset;
  return record;
}

bool ChunkStore::Record::matches(int64_t start, std::string_view blocks) const {
  for (int64_t done = 0; done < static_cast<int64_t>(blocks.size()); done += kChecksumBlock) {
    const int64_t length = std::min<int64_t>(kChecksumBlock, blocks.size() - done);
    if (blockChecksum(blocks.data() + done, length) !=
        checksums[static_cast<size_t>((start + done) / kChecksumBlock)])
      return false;
  }
  return true;
}

ChunkStore::BlockRange ChunkStore::Record::blocksAround(int64_t offset, int64_t length) const {
  const int64_t start = offset / kChecksumBlock * kChecksumBlock;
  const int64_t end =
      std::min(size, (offset + length + kChecksumBlock - 1) / kChecksumBlock * kChecksumBlock);
  return {start, end - start};
}

Status ChunkStore::verifyRead(const ChunkId& id, const std::string& key, const Record& record,
                              const Status& read, int64_t start, std::string_view blocks) {
  Status status = read;
  if (status.isOk() && !record.matches(start, blocks)) status = corruption("checksum mismatch");
  if (status.isOk()) return status;
  {
    MutexLock lock(mutex_);
    if (auto now = recordOf(key); !now.isOk() || *now != record)
      return notFound("cached chunk of " + id.path + " was dropped while it was read");
    (void)dropLocked(key, record);
  }
  Logger("cache").warn("dropped a damaged chunk",
                       {{"path", id.path}, {"chunk", id.index}, {"error", status}});
  return corruption("cached chunk of " + id.path + " is damaged; dropped: " + status.message());
}

Result<std::string> ChunkStore::read(const ChunkId& id, int64_t offset, int64_t length) {
  const std::string key = id.key();
  GRANARY_ASSIGN_OR_RETURN(Record record, recordForRead(key, offset, length));
  const BlockRange blocks = record.blocksAround(offset, length);
  // A read that starts inside the chunk is likely part of a sequential pass: read ahead.
  const int64_t readAhead =
      offset > 0 ? std::min(kReadAhead, record.size - blocks.start - blocks.length) : 0;
  auto data = readFile(fileOf(record.directory, key), blocks.start, blocks.length, readAhead);
  GRANARY_RETURN_IF_ERROR(verifyRead(id, key, record, data.status(), blocks.start,
                                     data.isOk() ? std::string_view(*data) : std::string_view()));
  if (blocks.start == offset && blocks.length == length) return data;
  return data->substr(static_cast<size_t>(offset - blocks.start), static_cast<size_t>(length));
}

Result<int64_t> ChunkStore::readInto(const ChunkId& id, int64_t offset, int64_t length,
                                     std::span<char> buffer) {
  const std::string key = id.key();
  GRANARY_ASSIGN_OR_RETURN(Record record, recordForRead(key, offset, length));
  if (length > static_cast<int64_t>(buffer.size()))
    return invalidArgument("the buffer is smaller than the read");
  // The whole blocks around the range are read and checked: into the caller's buffer where
  // they fit, else into memory of its own.
  const BlockRange blocks = record.blocksAround(offset, length);
  std::unique_ptr<char, decltype(&std::free)> scratch(nullptr, &std::free);
  std::span<char> into = buffer;
  if (blocks.length > static_cast<int64_t>(buffer.size())) {
    const size_t room = static_cast<size_t>((blocks.length + 4095) / 4096 * 4096);
    scratch.reset(static_cast<char*>(std::aligned_alloc(4096, room)));
    if (!scratch) return Status(StatusCode::kResourceExhausted, "no memory for a chunk read");
    into = {scratch.get(), room};
  }
  const Status read =
      readUncached(fileOf(record.directory, key), blocks.start, blocks.length, into);
  GRANARY_RETURN_IF_ERROR(verifyRead(id, key, record, read, blocks.start,
                                     {into.data(), static_cast<size_t>(blocks.length)}));
  if (into.data() != buffer.data() || blocks.start != offset)
    std::memmove(buffer.data(), into.data() + (offset - blocks.start), static_cast<size_t>(length));
  return length;
}

uint32_t ChunkStore::blockChecksum(const char* data, int64_t length) {
  return static_cast<uint32_t>(xxh3(data, static_cast<size_t>(length)));
}

std::vector<uint32_t> ChunkStore::blockChecksums(std::string_view data) {
  const auto size = static_cast<int64_t>(data.size());
  std::vector<uint32_t> sums(static_cast<size_t>(blockCount(size)));
  for (int64_t b = 0; b < blockCount(size); ++b) {
    const int64_t start = b * kChecksumBlock;
    sums[static_cast<size_t>(b)] =
        blockChecksum(data.data() + start, std::min(kChecksumBlock, size - start));
  }
  return sums;
}

Result<OwnedFd> ChunkStore::openVerified(const ChunkId& id) {
  GRANARY_ASSIGN_OR_RETURN(OpenChunk chunk, openWithChecksums(id));
  return std::move(chunk.file);
}

Result<OpenChunk> ChunkStore::openWithChecksums(const ChunkId& id) {
  const std::string key = id.key();
  GRANARY_ASSIGN_OR_RETURN(const Record record, recordOf(key));
  const std::filesystem::path path = fileOf(record.directory, key);
  OwnedFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  Status opened = Status::ok();
  if (!file)
    opened = notFound(path.string() + " is missing");
  else if (::fstat(file.get(), &st) != 0 || st.st_size != record.size)
    opened = corruption(path.string() + " does not have its recorded size");
  GRANARY_RETURN_IF_ERROR(verifyRead(id, key, record, opened, 0, {}));
  const auto open = [&] { return OpenChunk{std::move(file), record.size, record.checksums}; };
  if (record.sealedChangeTime != 0 && changeTimeOf(st) == record.sealedChangeTime) return open();
  std::string blocks(static_cast<size_t>(std::min<int64_t>(record.size, kVerifyPiece)), '\0');
  for (int64_t start = 0; start < record.size; start += kVerifyPiece) {
    const int64_t length = std::min<int64_t>(kVerifyPiece, record.size - start);
    const int64_t done = readFully(file.get(), blocks.data(), length, start);
    const Status read =
        done == length ? Status::ok() : corruption(path.string() + " is unreadable");
    GRANARY_RETURN_IF_ERROR(
        verifyRead(id, key, record, read, start, {blocks.data(), static_cast<size_t>(length)}));
  }
  return open();
}

bool ChunkStore::contains(const ChunkId& id) const { return recordOf(id.key()).isOk(); }

Status ChunkStore::remove(const ChunkId& id) {
  const std::string key = id.key();
  MutexLock lock(mutex_);
  GRANARY_ASSIGN_OR_RETURN(Record record, recordOf(key));
  return dropLocked(key, record).status();
}

Status ChunkStore::forEachChunk(std::string_view generation,
                                const std::function<void(ChunkId&&, int64_t)>& each) const {
  std::string prefix(generation);
  prefix += '\0';
  std::unique_ptr<rocksdb::Iterator> it(index_->NewIterator(scanOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::string_view rest = it->key().ToStringView().substr(prefix.size());
    const size_t nul = rest.rfind('\0');
    const int64_t size = recordedSize(it->value().ToStringView());
    if (nul == std::string_view::npos || size < 0) continue;
    each(ChunkId{std::string(generation), std::string(rest.substr(0, nul)),
                 std::atoll(std::string(rest.substr(nul + 1)).c_str())},
         size);
  }
  return fromRocks(it->status(), "chunk index scan");
}

Result<int64_t> ChunkStore::dropGeneration(std::string_view generation) {
  std::string prefix(generation);
  prefix += '\0';
  std::vector<std::pair<std::string, Record>> doomed;
  {
    std::unique_ptr<rocksdb::Iterator> it(index_->NewIterator(scanOptions()));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      auto record = recordOf(it->key().ToString());
      if (record.isOk()) doomed.emplace_back(it->key().ToString(), *record);
    }
  }
  int64_t freed = 0;
  MutexLock lock(mutex_);
  for (const auto& [key, record] : doomed) {
    GRANARY_ASSIGN_OR_RETURN(const int64_t bytes, dropLocked(key, record));
    freed += bytes;
  }
  return freed;
}

Result<ReconcileReport> ChunkStore::reconcile(bool verifyChecksums) {
  ReconcileReport report;
  MutexLock lock(mutex_);
  std::set<std::filesystem::path> expected;
  std::vector<int64_t> held(directories_.size(), 0);  // the bytes of the chunks kept
  std::vector<std::pair<std::string, Record>> bad;
  {
    std::unique_ptr<rocksdb::Iterator> it(index_->NewIterator(scanOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::string key = it->key().ToString();
      if (!isChunkKey(key)) continue;
      auto record = recordOf(key);
      if (!record.isOk()) {
        bad.emplace_back(key, Record{.known = false});
        continue;
      }
      const auto file = fileOf(record->directory, key);
      struct stat st {};
      bool intact = ::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                    static_cast<int64_t>(st.st_size) == record->size;
      // A chunk written after the last flush may have reached the index but not the disk
      // (a machine crash): its bytes are checked too.
      if (intact && (verifyChecksums || record->epoch > flushedEpoch_)) {
        auto data = readFile(file, 0, record->size);
        intact = data.isOk() && record->matches(0, *data);
      }
      if (intact) {
        expected.insert(file);
        // A file with several names (links) counts once, a share under each name.
        const auto links = static_cast<int64_t>(std::max<nlink_t>(st.st_nlink, 1));
        held[record->directory] += (record->size + links - 1) / links;
        ++report.kept;
        if (record->epoch > flushedEpoch_) ++report.verifiedUnflushed;
      } else {
        bad.emplace_back(key, *record);
      }
    }
  }
  for (const auto& [key, record] : bad) {
    if (!record.known) {
      // `&k = key`: clang before 16 cannot capture a structured binding (the fuzz build's).
      (void)writeIndex(64, [&, &k = key] { return index_->Delete(rocksdb::WriteOptions(), k); });
    } else {
      GRANARY_RETURN_IF_ERROR(dropLocked(key, record).status());
    }
    ++report.droppedRecords;
  }
  used_ = std::move(held);
  for (const auto& directory : directories_) {
    std::error_code error;
    for (auto it = std::filesystem::recursive_directory_iterator(directory.path, error);
         !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
      if (it.depth() == 0 && it->path().filename() == kOthersDirectory) {
        it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file() || expected.count(it->path())) continue;
      std::error_code ignored;
      std::filesystem::remove(it->path(), ignored);
      ++report.removedFiles;
    }
  }
  return report;
}

int64_t ChunkStore::diskRoom(uint32_t directory) const {
  struct statvfs fs {};
  if (::statvfs(directories_[directory].path.c_str(), &fs) != 0) return INT64_MAX;  // put says
  const auto total = static_cast<int64_t>(fs.f_blocks * fs.f_frsize);
  const auto free = static_cast<int64_t>(fs.f_bavail * fs.f_frsize);
  const int64_t keep = std::max(2 * StoreGuard::kMarginBytes, std::min(kMaxKeptFree, total / 20));
  return free - keep - writing_[directory];
}

std::vector<DirectoryUsage> ChunkStore::usage() const {
  MutexLock lock(mutex_);
  std::vector<DirectoryUsage> out;
  for (size_t d = 0; d < directories_.size(); ++d) {
    out.push_back({directories_[d].path, used_[d], directories_[d].quotaBytes});
  }
  return out;
}

}  // namespace granary::cache
