#define FUSE_USE_VERSION 314
#include "engine/mount/dataset_fs.h"

#include <fcntl.h>
#include <fuse3/fuse_lowlevel.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "common/log.h"
#include "common/thread_annotations.h"
#include "engine/mount/passthrough.h"
#include "engine/mount/read_buffers.h"

namespace granary::cache {

// ---- what the handlers see ----

namespace {

// Open files or directories by the handle the kernel keeps for them. Handles live as long as
// the connection, which may be longer than this process: a handle a previous process gave out
// (an adopted connection) is not in the table and is opened again on first use. Handles start at
// a random number, so that a new one does not collide with one still open from before.
template <typename T>
class Handles {
 public:
  Handles() : next_(std::random_device()() | (uint64_t{std::random_device()()} << 31)) {}
  uint64_t add(T value) {
    MutexLock lock(mutex_);
    const uint64_t handle = next_++;
    open_[handle] = std::make_shared<T>(std::move(value));
    return handle;
  }
  // The handle's value, else `reopen()`'s, kept under the handle; null when that fails.
  template <typename Reopen>
  std::shared_ptr<T> find(uint64_t handle, const Reopen& reopen) {
    {
      MutexLock lock(mutex_);
      if (auto it = open_.find(handle); it != open_.end()) return it->second;
    }
    auto value = reopen();
    if (!value) return nullptr;
    auto shared = std::make_shared<T>(std::move(*value));
    MutexLock lock(mutex_);
    return open_.try_emplace(handle, std::move(shared)).first->second;
  }
  void remove(uint64_t handle) {
    MutexLock lock(mutex_);
    open_.erase(handle);
  }

 private:
  Mutex mutex_;
  uint64_t next_ GRANARY_GUARDED_BY(mutex_);
  std::unordered_map<uint64_t, std::shared_ptr<T>> open_ GRANARY_GUARDED_BY(mutex_);
};

// Manifest entries by inode, for requests that name only an inode (reads, above all): filled by
// lookups, else read from the manifest. Bounded: a full shard starts again empty.
class InodeCache {
 public:
  void put(const ManifestEntry& entry) {
    Shard& shard = shardOf(entry.inode);
    MutexLock lock(shard.mutex);
    if (shard.entries.size() >= kShardEntries) shard.entries.clear();
    shard.entries[entry.inode] = std::make_shared<const ManifestEntry>(entry);
  }
  Result<std::shared_ptr<const ManifestEntry>> find(uint64_t inode, DatasetCache& cache) {
    Shard& shard = shardOf(inode);
    {
      MutexLock lock(shard.mutex);
      if (auto it = shard.entries.find(inode); it != shard.entries.end()) return it->second;
    }
    GRANARY_ASSIGN_OR_RETURN(ManifestEntry entry, cache.statInode(inode));
    put(entry);
    return std::make_shared<const ManifestEntry>(std::move(entry));
  }

 private:
  static constexpr size_t kShards = 16, kShardEntries = 4096;
  struct Shard {
    Mutex mutex;
    std::unordered_map<uint64_t, std::shared_ptr<const ManifestEntry>> entries
        GRANARY_GUARDED_BY(mutex);
  };
  Shard& shardOf(uint64_t inode) { return shards_[inode % kShards]; }
  std::array<Shard, kShards> shards_;
};

// A directory handle: a page of entries and where it starts, so sequential reads page through
// the manifest by name instead of offsets.
struct DirectoryHandle {
  ManifestEntry directory;
  std::vector<ManifestEntry> page;
  off_t pageStart = 0;
};

}  // namespace

// The dataset a mount serves. A mount made before its dataset is ready (mountPending) holds
// its requests here until serve(), or until it stops.
class ServedDataset {
 public:
  void set(std::shared_ptr<DatasetCache> cache) {
    MutexLock lock(mutex_);
    cache_ = std::move(cache);
    ready_.store(cache_.get());
    changed_.notify_all();
  }
  void close() {
    MutexLock lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }
  // The dataset, once there is one; null when the mount stopped first.
  DatasetCache* wait() {
    if (DatasetCache* ready = ready_.load()) return ready;
    MutexLock lock(mutex_);
    changed_.wait(lock, [&]() GRANARY_REQUIRES(mutex_) { return cache_ != nullptr || closed_; });
    return cache_.get();
  }

 private:
  std::atomic<DatasetCache*> ready_{nullptr};  // the fast path, once set
  Mutex mutex_;
  std::condition_variable_any changed_;  // waits on mutex_
  std::shared_ptr<DatasetCache> cache_ GRANARY_GUARDED_BY(mutex_);
  bool closed_ GRANARY_GUARDED_BY(mutex_) = false;
};

struct DatasetFilesystem::State {
  State(const MountOptions& options, bool adoptedConnection)
      : negotiation(options.passthrough),
        passthroughMinAverageFileBytes(options.passthroughMinAverageFileBytes),
        adopted(adoptedConnection) {}

  ServedDataset cache;
  ReaderAccounting* accounting = nullptr;
  std::string dataset;  // "namespace/name"
  InodeCache inodes;
  bool canDeclineOpens = false;  // an open answered ENOSYS: the kernel sends no more opens
  Handles<DirectoryHandle> directories;
  passthrough::Negotiation negotiation;
  passthrough::BackingFiles backings;
  const int64_t passthroughMinAverageFileBytes;
  std::once_flag sizesWeighed;             // at the first open, once the dataset is listed
  std::atomic<bool> filesTooSmall{false};  // to be worth an open request each
  std::atomic<int64_t> passedThrough{0};   // opens
  // A connection a previous process served: how it opened the files still open is not known.
  const bool adopted;
};

namespace {

// A generation never changes: the kernel may keep what it learns.
constexpr double kForever = 365.0 * 24 * 3600;
constexpr size_t kDirectoryPage = 512;
constexpr int kReadAheadBytes = 16 << 20;

DatasetFilesystem::State& stateOf(fuse_req_t req) {
  return *static_cast<DatasetFilesystem::State*>(fuse_req_userdata(req));
}

// The dataset `req` is for, once the mount serves one; null, with `req` answered, when the mount
// stopped first.
DatasetCache* datasetOf(fuse_req_t req) {
  DatasetCache* cache = stateOf(req).cache.wait();
  if (cache == nullptr) fuse_reply_err(req, EIO);
  return cache;
}

int errnoOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kNotFound:
      return ENOENT;
    case StatusCode::kInvalidArgument:
      return EINVAL;
    case StatusCode::kFailedPrecondition:
      return ENOTDIR;
    case StatusCode::kCancelled:
      return EINTR;
    default:
      return EIO;
  }
}

struct stat attributesOf(const ManifestEntry& entry) {
  struct stat st {};
  st.st_ino = entry.inode;
  if (entry.directory) {
    st.st_mode = S_IFDIR | 0555;
    st.st_nlink = 2;
  } else {
    st.st_mode = S_IFREG | 0444 | (entry.mode & 0111);
    st.st_nlink = 1;
    st.st_size = entry.size;
    st.st_blocks = (entry.size + 511) / 512;
  }
  st.st_blksize = 1 << 20;
  st.st_mtim.tv_sec = entry.modifiedUnixNanos / 1'000'000'000;
  st.st_mtim.tv_nsec = entry.modifiedUnixNanos % 1'000'000'000;
  st.st_ctim = st.st_atim = st.st_mtim;
  return st;
}

fuse_entry_param entryOf(const ManifestEntry& entry) {
  fuse_entry_param e{};
  e.ino = entry.inode;
  e.generation = 1;
  e.attr = attributesOf(entry);
  e.attr_timeout = kForever;
  e.entry_timeout = kForever;
  return e;
}

std::string childPath(const ManifestEntry& parent, const char* name) {
  return parent.path.empty() ? std::string(name) : parent.path + "/" + name;
}

void onLookup(fuse_req_t req, fuse_ino_t parentInode, const char* name) {
  auto& state = stateOf(req);
  DatasetCache* cache = datasetOf(req);
  if (cache == nullptr) return;
  auto parent = state.inodes.find(parentInode, *cache);
  if (!parent.isOk()) return (void)fuse_reply_err(req, errnoOf(parent.status()));
  if (!(*parent)->directory) return (void)fuse_reply_err(req, ENOTDIR);
  auto child = cache->stat(childPath(**parent, name));
  if (child.isOk()) {
    state.inodes.put(*child);
    const fuse_entry_param e = entryOf(*child);
    return (void)fuse_reply_entry(req, &e);
  }
  if (child.status().code() == StatusCode::kNotFound ||
      child.status().code() == StatusCode::kInvalidArgument) {
    fuse_entry_param negative{};  // the kernel remembers the name is absent
    negative.entry_timeout = kForever;
    return (void)fuse_reply_entry(req, &negative);
  }
  fuse_reply_err(req, errnoOf(child.status()));
}

void onGetattr(fuse_req_t req, fuse_ino_t inode, fuse_file_info*) {
  auto& state = stateOf(req);
  DatasetCache* cache = datasetOf(req);
  if (cache == nullptr) return;
  auto entry = state.inodes.find(inode, *cache);
  if (!entry.isOk()) return (void)fuse_reply_err(req, errnoOf(entry.status()));
  const struct stat st = attributesOf(**entry);
  fuse_reply_attr(req, &st, kForever);
}

// How an open file is read. Through the page cache, files need no open state: where the
// kernel allows, opens are declined once with ENOSYS and never sent again (nor their releases);
// reads name the inode, which is all they need, also across an adopted connection. With
// passthrough, a file held whole in one verified chunk is read by the kernel from that chunk's
// file; one that spans chunks through the page cache when its first chunk is here; one whose
// (first) chunk is not here by direct I/O: each read reaches the node, which fetches the chunk
// (the reader's wait counted) and answers the reads after it from the chunk in memory while the
// next is fetched ahead, and the bytes go from there straight into the reader's buffer (no page
// cache between, a copy less on a read from a peer); a file held in one chunk stays free to be
// passed through once its chunk is here. (With passthrough the connection also agreed that
// direct I/O files may be mapped: engine/mount/passthrough.h.) Passthrough costs every open a
// request to this process (and its release another), which the page cache path never makes: a
// dataset whose files are small on average reads faster through the page cache, and is read that
// way. A connection adopted from a previous process goes on as that process agreed with the kernel.
enum class ReadPath { kPageCache, kPassthrough };

// Whether the connection passes files through: agreed with the kernel (by this process, or by
// the one it adopted the connection from), and the kernel took the backing files so far.
bool passthroughAgreed(const DatasetFilesystem::State& state) {
  const bool agreed = state.adopted ? state.backings.agreedBefore() : state.negotiation.agreed();
  return agreed && !state.backings.refused();
}

// `cache` is listed.
ReadPath readPathOf(DatasetFilesystem::State& state, DatasetCache& cache) {
  if (!passthroughAgreed(state)) return ReadPath::kPageCache;
  std::call_once(state.sizesWeighed, [&] {
    state.backings.recordAgreed();
    const WarmProgress files = cache.state().progress;
    const int64_t average = files.totalBytes / std::max<int64_t>(files.totalFiles, 1);
    state.filesTooSmall = average < state.passthroughMinAverageFileBytes;
    Logger("mount").info(
        state.filesTooSmall ? "files read through the page cache"
                            : "files cached whole are passed through",
        {{"dataset", state.dataset},
         {"averageFileBytes", average},
         {"passthroughMinAverageFileBytes", state.passthroughMinAverageFileBytes}});
  });
  return state.filesTooSmall ? ReadPath::kPageCache : ReadPath::kPassthrough;
}

constexpr uint64_t kPassedThrough = 1;  // the handle of a file the kernel reads directly

void replyThroughPageCache(fuse_req_t req, fuse_file_info* fi) {
  fi->fh = 0;
  fi->keep_cache = 1;  // the file's pages stay valid across opens
  fi->noflush = 1;
  fuse_reply_open(req, fi);
}

void replyDirect(fuse_req_t req, fuse_file_info* fi) {
  fi->fh = 0;
  fi->direct_io = 1;
  fi->noflush = 1;
  fuse_reply_open(req, fi);
}

// Opens `file` for the kernel to read from its verified chunk; else by direct I/O.
void openPassedThrough(fuse_req_t req, fuse_ino_t inode, fuse_file_info* fi, DatasetCache& cache,
                       const ManifestEntry& file) {
  auto& state = stateOf(req);
  // An inode with open files passed through is read from the same backing file: the kernel
  // fails any other open of it.
  std::optional<int32_t> backing = state.backings.share(inode);
  if (!backing) {
    auto chunk = cache.openCached(file);
    if (!chunk.isOk()) return replyDirect(req, fi);  // a miss, or a damaged chunk: fetched
    auto registered = state.backings.acquire(inode, chunk->get());
    if (!registered.isOk()) {
      const bool refused = state.backings.refused();
      Logger("mount").log(
          refused ? LogLevel::kWarn : LogLevel::kDebug,
          refused ? "no passthrough: every read goes through granary-cache-node"
                  : "a file is read through granary-cache-node",
          {{"dataset", state.dataset}, {"path", file.path}, {"error", registered.status()}});
      return replyDirect(req, fi);
    }
    backing = *registered;
  }
  // Counted before the answer, which lets the reader go on (and read, and look at the counts)
  // at once.
  ++state.passedThrough;
  cache.countPassedThrough(file);
  if (state.accounting != nullptr) {
    ReadRecord record;
    record.localBytes = file.size;  // the kernel reads it without us: counted whole at open
    state.accounting->record(state.dataset, static_cast<int>(fuse_req_ctx(req)->pid), record);
  }
  if (!passthrough::replyOpen(req, *backing, kPassedThrough)) {  // interrupted: no open
    --state.passedThrough;
    state.backings.release(inode);
  }
}

void onOpen(fuse_req_t req, fuse_ino_t inode, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return (void)fuse_reply_err(req, EROFS);
  auto& state = stateOf(req);
  DatasetCache* cache = datasetOf(req);
  if (cache == nullptr) return;
  auto file = state.inodes.find(inode, *cache);  // the dataset is listed from here on
  if (!file.isOk()) return (void)fuse_reply_err(req, errnoOf(file.status()));
  const ReadPath path = readPathOf(state, *cache);
  if (path == ReadPath::kPageCache && state.canDeclineOpens)
    return (void)fuse_reply_err(req, ENOSYS);
  if (path == ReadPath::kPageCache) return replyThroughPageCache(req, fi);
  if (!cache->heldInOneChunk(**file))
    return cache->hasChunk((*file)->path, 0) ? replyThroughPageCache(req, fi)
                                             : replyDirect(req, fi);
  openPassedThrough(req, inode, fi, *cache, **file);
}

void onRelease(fuse_req_t req, fuse_ino_t inode, fuse_file_info* fi) {
  if (fi->fh == kPassedThrough) stateOf(req).backings.release(inode);
  fuse_reply_err(req, 0);
}

// A read is served from this node's disk into a pooled buffer, which is the read's turn at the
// disk. A read whose first chunk is not on the disk is answered from that chunk in memory, where
// it lies (held since an earlier fetch, else fetched now, the reader's wait counted from there),
// when the read lies within it; else piece by piece in a buffer of its own.
void onRead(fuse_req_t req, fuse_ino_t inode, size_t size, off_t offset, fuse_file_info*) {
  auto& state = stateOf(req);
  DatasetCache* cache = datasetOf(req);
  if (cache == nullptr) return;
  auto opened = state.inodes.find(inode, *cache);
  if (!opened.isOk()) return (void)fuse_reply_err(req, errnoOf(opened.status()));
  const ManifestEntry& file = **opened;
  const int pid = static_cast<int>(fuse_req_ctx(req)->pid);
  // Read times matter only to the accounting, on its clock.
  const auto now = [&] {
    return state.accounting != nullptr ? state.accounting->clock().monoNow() : Clock::MonoTime{};
  };
  const auto start = now();
  const auto length = static_cast<int64_t>(size);
  ReadRecord record;
  const auto count = [&](Source source, int64_t bytes) {
    (source == Source::kLocal  ? record.localBytes
     : source == Source::kPeer ? record.peerBytes
                               : record.originBytes) += bytes;
  };
  const auto beginWait = [&] {  // a miss: the reader is blocked from here on
    if (state.accounting == nullptr) return;
    record.waitBegan = start;
    state.accounting->beginWait(state.dataset, pid, start);
  };
  // A read that failed after it began to wait ends its wait all the same.
  const auto fail = [&](int error) {
    if (record.waitBegan && state.accounting != nullptr) {
      record.end = now();
      record.wait = record.end - start;
      state.accounting->record(state.dataset, pid, record);
    }
    fuse_reply_err(req, error);
  };
  const auto failed = [&](const Status& error) {
    Logger("mount").warn("read failed",
                         {{"dataset", state.dataset}, {"path", file.path}, {"error", error}});
    fail(EIO);
  };
  const auto reply = [&](const char* bytes, int64_t filled) {
    record.end = now();
    if (record.peerBytes + record.originBytes > 0) record.wait = record.end - start;
    if (state.accounting != nullptr) state.accounting->record(state.dataset, pid, record);
    fuse_reply_buf(req, bytes, static_cast<size_t>(filled));
  };
  ReadBuffer buffer = ReadBuffer::pooled(size);
  bool pooled = true;
  int64_t filled = 0;
  while (filled < length) {
    if (!buffer) return fail(ENOMEM);
    auto piece = cache->readPieceInto(file, offset + filled, length - filled,
                                      buffer.span().subspan(static_cast<size_t>(filled)),
                                      /*fetch=*/!pooled || filled > 0);
    if (pooled && filled == 0 && piece.status().code() == StatusCode::kNotFound) {
      buffer.release();  // no turn at the disk is held while the network is waited on
      auto inMemory = cache->readPieceInMemory(file, offset, length, /*fetch=*/false);
      if (inMemory.status().code() == StatusCode::kNotFound) {
        beginWait();
        inMemory = cache->readPieceInMemory(file, offset, length, /*fetch=*/true);
      }
      if (!inMemory.isOk()) return failed(inMemory.status());
      count(inMemory->chunk.source, inMemory->size);
      if (inMemory->size == length || offset + inMemory->size >= file.size)
        return reply(inMemory->size > 0 ? inMemory->data() : nullptr, inMemory->size);
      buffer = ReadBuffer::own(size);  // the read goes on in the next chunk
      pooled = false;
      if (!buffer) return fail(ENOMEM);
      std::memcpy(buffer.span().data(), inMemory->data(), static_cast<size_t>(inMemory->size));
      filled = inMemory->size;
      continue;
    }
    if (!piece.isOk()) return failed(piece.status());
    if (piece->size == 0) break;
    count(piece->source, piece->size);
    filled += piece->size;
  }
  reply(buffer.span().data(), filled);
}

void onOpendir(fuse_req_t req, fuse_ino_t inode, fuse_file_info* fi) {
  auto& state = stateOf(req);
  DatasetCache* cache = datasetOf(req);
  if (cache == nullptr) return;
  auto entry = state.inodes.find(inode, *cache);
  if (!entry.isOk()) return (void)fuse_reply_err(req, errnoOf(entry.status()));
  if (!(*entry)->directory) return (void)fuse_reply_err(req, ENOTDIR);
  auto& directories = state.directories;
  fi->fh = directories.add(DirectoryHandle{**entry, {}, 0});
  fi->keep_cache = 1;
  fi->cache_readdir = 1;
  if (fuse_reply_open(req, fi) != 0) directories.remove(fi->fh);
}

void onReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  stateOf(req).directories.remove(fi->fh);
  fuse_reply_err(req, 0);
}

// Makes `handle.page` hold the entry at `offset` (if the directory has one).
Status seek(DatasetCache& cache, DirectoryHandle& handle, off_t offset) {
  const auto inPage = [&] {
    return offset >= handle.pageStart &&
           offset < handle.pageStart + static_cast<off_t>(handle.page.size());
  };
  if (inPage()) return Status::ok();
  std::string after;
  off_t start = 0;
  if (offset >= handle.pageStart && !handle.page.empty()) {  // forward: continue from here
    after = handle.page.back().path.substr(handle.page.back().path.rfind('/') + 1);
    start = handle.pageStart + static_cast<off_t>(handle.page.size());
  }
  while (true) {
    GRANARY_ASSIGN_OR_RETURN(auto page, cache.list(handle.directory.path, after, kDirectoryPage));
    handle.page = std::move(page);
    handle.pageStart = start;
    if (handle.page.empty() || inPage()) return Status::ok();
    const auto& last = handle.page.back().path;
    after = last.substr(last.rfind('/') + 1);
    start += static_cast<off_t>(handle.page.size());
  }
}

void readDirectory(fuse_req_t req, fuse_ino_t inode, size_t size, off_t offset, fuse_file_info* fi,
                   bool plus) {
  auto& state = stateOf(req);
  DatasetCache* cache = datasetOf(req);
  if (cache == nullptr) return;
  const auto opened = state.directories.find(fi->fh, [&]() -> std::optional<DirectoryHandle> {
    auto entry = state.inodes.find(inode, *cache);
    if (!entry.isOk()) return std::nullopt;
    return DirectoryHandle{**entry, {}, 0};
  });
  if (!opened) return (void)fuse_reply_err(req, EIO);
  DirectoryHandle& handle = *opened;
  std::string buffer(size, '\0');
  size_t used = 0;
  for (off_t at = offset;; ++at) {
    if (const Status moved = seek(*cache, handle, at); !moved.isOk())
      return (void)fuse_reply_err(req, errnoOf(moved));
    if (at >= handle.pageStart + static_cast<off_t>(handle.page.size())) break;  // the end
    const ManifestEntry& entry = handle.page[at - handle.pageStart];
    const std::string name = entry.path.substr(entry.path.rfind('/') + 1);
    size_t added;
    if (plus) {
      const fuse_entry_param e = entryOf(entry);
      added =
          fuse_add_direntry_plus(req, buffer.data() + used, size - used, name.c_str(), &e, at + 1);
    } else {
      const struct stat st = attributesOf(entry);
      added = fuse_add_direntry(req, buffer.data() + used, size - used, name.c_str(), &st, at + 1);
    }
    if (added > size - used) break;  // full: the kernel asks again from `at`
    used += added;
  }
  fuse_reply_buf(req, buffer.data(), used);
}

void onReaddir(fuse_req_t req, fuse_ino_t inode, size_t size, off_t offset, fuse_file_info* fi) {
  readDirectory(req, inode, size, offset, fi, false);
}

void onReaddirplus(fuse_req_t req, fuse_ino_t inode, size_t size, off_t offset,
                   fuse_file_info* fi) {
  readDirectory(req, inode, size, offset, fi, true);
}

void onStatfs(fuse_req_t req, fuse_ino_t) {
  DatasetCache* cache = datasetOf(req);
  if (cache == nullptr) return;
  const DatasetState state = cache->state();
  struct statvfs st {};
  st.f_bsize = st.f_frsize = 4096;
  st.f_blocks = static_cast<fsblkcnt_t>((state.progress.totalBytes + 4095) / 4096);
  st.f_files = static_cast<fsfilcnt_t>(state.progress.totalFiles);
  st.f_namemax = 255;
  st.f_flag = ST_RDONLY;
  fuse_reply_statfs(req, &st);
}

void onInit(void* userdata, fuse_conn_info* conn) {
  auto& state = *static_cast<DatasetFilesystem::State*>(userdata);
  state.canDeclineOpens = (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0;
  askMountSettings(conn);
  if (conn->capable & FUSE_CAP_CACHE_SYMLINKS) conn->want |= FUSE_CAP_CACHE_SYMLINKS;
}

const fuse_lowlevel_ops kOperations = [] {
  fuse_lowlevel_ops ops{};
  ops.init = onInit;
  ops.lookup = onLookup;
  ops.getattr = onGetattr;
  ops.open = onOpen;
  ops.read = onRead;
  ops.release = onRelease;
  ops.opendir = onOpendir;
  ops.readdir = onReaddir;
  ops.readdirplus = onReaddirplus;
  ops.releasedir = onReleasedir;
  ops.statfs = onStatfs;
  return ops;
}();

// The session's reads and writes of the connection, through its passthrough negotiation.
ssize_t readRequest(int fd, void* buffer, size_t size, void* userdata) {
  const ssize_t n = ::read(fd, buffer, size);
  if (n > 0)
    static_cast<DatasetFilesystem::State*>(userdata)->negotiation.sawRequest(
        buffer, static_cast<size_t>(n));
  return n;
}

ssize_t writeReply(int fd, iovec* iov, int count, void* userdata) {
  return static_cast<DatasetFilesystem::State*>(userdata)->negotiation.writeReply(fd, iov, count);
}

const fuse_custom_io kNegotiatingIo{writeReply, readRequest, nullptr, nullptr};

// Feeds the session the FUSE_INIT a kernel sends a new connection: an adopted connection was
// initialised with the previous process, and libfuse answers nothing before an INIT. The reply
// names no pending request, so the kernel drops it.
void replayInit(fuse_session* session) {
  struct {
    fuse_in_header header;
    fuse_init_in init;
  } message{};
  message.header.len = sizeof message;
  message.header.opcode = FUSE_INIT;
  message.header.unique = ~uint64_t{0} >> 2;
  message.init.major = FUSE_KERNEL_VERSION;
  message.init.minor = FUSE_KERNEL_MINOR_VERSION;
  message.init.max_readahead = kReadAheadBytes;
  message.init.flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_DO_READDIRPLUS |
                       FUSE_READDIRPLUS_AUTO | FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES |
                       FUSE_CACHE_SYMLINKS | FUSE_NO_OPEN_SUPPORT;
  fuse_buf buffer{};
  buffer.mem = &message;
  buffer.size = sizeof message;
  fuse_session_process_buf(session, &buffer);
}

// Asks the kernel to queue again the requests the previous process read but never answered
// (FUSE_NOTIFY_RESEND, Linux 6.9+). False where the kernel does not know it.
bool resendPending(int fd) {
  constexpr int kNotifyResend = 7;
  fuse_out_header header{};
  header.len = sizeof header;
  header.error = kNotifyResend;
  return ::write(fd, &header, sizeof header) == static_cast<ssize_t>(sizeof header);
}

void ignoreSignal(int) {}

// The kernel reads a FUSE file ahead by its backing device's read_ahead_kb, 128 KiB unless
// raised: too little to keep a sequential reader of large files busy. Best effort (sysfs may be
// read-only in a container).
// Found in /proc/self/mountinfo rather than with stat(), which would ask this very mount (and
// wait, for one that serves no dataset yet).
void raiseReadAhead(const std::filesystem::path& mountpoint, int kib) {
  std::ifstream info("/proc/self/mountinfo");
  std::string device;  // "major:minor" of the last (topmost) mount there
  for (std::string line; std::getline(info, line);) {
    std::istringstream fields(line);
    std::string id, parent, majorMinor, root, point;
    fields >> id >> parent >> majorMinor >> root >> point;
    if (point == mountpoint.string()) device = majorMinor;
  }
  if (!device.empty()) std::ofstream("/sys/class/bdi/" + device + "/read_ahead_kb") << kib;
}

}  // namespace

// ---- the request loop ----

void askMountSettings(fuse_conn_info* conn) {
  conn->max_readahead = kReadAheadBytes;
  // Reads ahead are background requests, 12 at once unless raised: too few to keep a window of
  // kReadAheadBytes in flight.
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  conn->want |= FUSE_CAP_ASYNC_READ | FUSE_CAP_PARALLEL_DIROPS;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

void serveRequests(fuse_session* session, int maxThreads) {
  fuse_loop_config* config = fuse_loop_cfg_create();
  // One descriptor for all threads: requests in flight on a cloned descriptor would fail when
  // the process dies, instead of waiting for the process that adopts the connection (and
  // cloning measured no faster).
  fuse_loop_cfg_set_clone_fd(config, 0);
  fuse_loop_cfg_set_max_threads(config, static_cast<unsigned>(maxThreads));
  fuse_loop_cfg_set_idle_threads(config, static_cast<unsigned>(maxThreads));
  fuse_session_loop_mt(session, config);
  fuse_loop_cfg_destroy(config);
}

struct DatasetFilesystem::Loop {
  std::thread thread;             // its native_handle() is signalled to wake the loop
  std::atomic<bool> done{false};  // the session ended (stopped, or unmounted from outside)
};

Result<std::unique_ptr<DatasetFilesystem>> DatasetFilesystem::mount(
    std::shared_ptr<DatasetCache> cache, const std::filesystem::path& mountpoint,
    ReaderAccounting* accounting, MountOptions options) {
  GRANARY_ASSIGN_OR_RETURN(auto fs,
                           mountPending(cache->key().label(), mountpoint, accounting, options));
  fs->serve(std::move(cache));
  return fs;
}

Result<std::unique_ptr<DatasetFilesystem>> DatasetFilesystem::mountPending(
    const std::string& dataset, const std::filesystem::path& mountpoint,
    ReaderAccounting* accounting, MountOptions options) {
  std::error_code error;
  std::filesystem::create_directories(mountpoint, error);
  if (error)
    return unavailable("cannot create the mount point " + mountpoint.string() + ": " +
                       error.message());
  return start(nullptr, dataset, mountpoint.string(), mountpoint, accounting, options, false);
}

void DatasetFilesystem::serve(std::shared_ptr<DatasetCache> cache) {
  cache_ = cache;
  state_->cache.set(std::move(cache));
}

Result<std::unique_ptr<DatasetFilesystem>> DatasetFilesystem::adopt(
    std::shared_ptr<DatasetCache> cache, int fuseFd, const std::filesystem::path& mountpoint,
    ReaderAccounting* accounting, MountOptions options) {
  const std::string dataset = cache->key().label();
  return start(std::move(cache), dataset, "/dev/fd/" + std::to_string(fuseFd), mountpoint,
               accounting, options, true);
}

Result<std::unique_ptr<DatasetFilesystem>> DatasetFilesystem::start(
    std::shared_ptr<DatasetCache> cache, const std::string& dataset, const std::string& mountTarget,
    const std::filesystem::path& mountpoint, ReaderAccounting* accounting, MountOptions options,
    bool adopted) {
  std::unique_ptr<DatasetFilesystem> fs(new DatasetFilesystem());
  fs->mountpoint_ = mountpoint;
  fs->state_ = std::make_unique<State>(options, adopted);
  if (cache) fs->serve(std::move(cache));
  fs->state_->accounting = accounting;
  fs->state_->dataset = dataset;
  const std::string fsname = "fsname=granary:" + fs->state_->dataset;
  std::string mountOptions = "ro,default_permissions,subtype=granary," + fsname;
  if (options.allowOther) mountOptions += ",allow_other";
  const char* argv[] = {"granary", "-o", mountOptions.c_str()};
  fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
  fs->session_ = fuse_session_new(&args, &kOperations, sizeof kOperations, fs->state_.get());
  fuse_opt_free_args(&args);  // libfuse copied what it parsed
  if (fs->session_ == nullptr) return unavailable("cannot create a FUSE session");
  if (fuse_session_mount(fs->session_, mountTarget.c_str()) != 0) {
    fuse_session_destroy(fs->session_);
    fs->session_ = nullptr;
    return unavailable("cannot mount " + fs->state_->dataset + " at " + mountpoint.string() +
                       " (is /dev/fuse available, and are we root?)");
  }
  fs->passthroughTable_ = options.passthroughTable;
  if (!options.passthroughTable.empty()) {  // else the table stays in memory, as it starts
    if (const Status kept = fs->state_->backings.open(options.passthroughTable, adopted);
        !kept.isOk())
      Logger("mount").warn("files passed through will not be known after a restart",
                           {{"dataset", fs->state_->dataset}, {"error", kept}});
  }
  fs->state_->backings.setConnection(fuse_session_fd(fs->session_));
  if (!adopted && options.passthrough &&
      fuse_session_custom_io(fs->session_, &kNegotiatingIo, fuse_session_fd(fs->session_)) != 0)
    Logger("mount").warn("cannot offer passthrough: every read goes through granary-cache-node",
                         {{"dataset", fs->state_->dataset}});
  if (adopted) {
    replayInit(fs->session_);
    if (!resendPending(fuse_session_fd(fs->session_))) {
      Logger("mount").warn("the kernel cannot resend requests the previous process held",
                           {{"dataset", fs->state_->dataset}, {"mountpoint", mountpoint.string()}});
    }
  }
  // A signal with a handler that does nothing wakes the loop when it should stop.
  struct sigaction action {};
  action.sa_handler = ignoreSignal;
  ::sigaction(SIGUSR2, &action, nullptr);
  fs->loop_ = std::make_unique<Loop>();
  fs->loop_->thread = std::thread([session = fs->session_, &loop = *fs->loop_, options] {
    serveRequests(session, options.maxThreads);
    loop.done = true;
  });
  raiseReadAhead(mountpoint, kReadAheadBytes >> 10);
  return fs;
}

int DatasetFilesystem::fd() const { return fuse_session_fd(session_); }

bool DatasetFilesystem::serving() const { return !loop_->done; }

bool DatasetFilesystem::passesThrough() const {
  return passthroughAgreed(*state_) && !state_->filesTooSmall;
}

int64_t DatasetFilesystem::opensPassedThrough() const { return state_->passedThrough.load(); }

DatasetFilesystem::~DatasetFilesystem() {
  if (session_ == nullptr) return;
  // Unmounting ends the connection (the request threads read ENODEV and stop) unless pods'
  // views still hold it. libfuse's own unmount would also close the descriptor the threads read,
  // racing them into EBADF.
  if (!detached_) ::umount2(mountpoint_.c_str(), MNT_DETACH);
  state_->cache.close();  // requests waiting for a dataset that never came
  fuse_session_exit(session_);
  while (!loop_->done) {
    ::pthread_kill(loop_->thread.native_handle(), SIGUSR2);  // wakes the loop to see it should stop
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  loop_->thread.join();
  if (!detached_) fuse_session_unmount(session_);  // frees what libfuse kept for the mount
  fuse_session_destroy(session_);
  if (!detached_ && !passthroughTable_.empty()) {
    std::error_code ignored;
    std::filesystem::remove(passthroughTable_, ignored);
  }
}

std::vector<MountEntry> currentMounts() {
  std::vector<MountEntry> out;
  std::ifstream mounts("/proc/self/mounts");
  for (MountEntry e; mounts >> e.source >> e.point >> e.type;) {
    out.push_back(e);
    mounts.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return out;
}

bool isStaleMount(const std::filesystem::path& path) {
  // statfs always reaches the daemon; stat may be answered from attributes the kernel kept.
  struct statvfs st;
  return ::statvfs(path.c_str(), &st) != 0 && errno == ENOTCONN;
}

bool cleanStaleMount(const std::filesystem::path& path) {
  return isStaleMount(path) && ::umount2(path.c_str(), MNT_DETACH) == 0;
}

}  // namespace granary::cache
