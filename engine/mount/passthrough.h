// FUSE passthrough (Linux 6.9+): the kernel serves the reads of an open file from a backing file
// the daemon named when it answered the open, with no request to the daemon and no copy through
// user space. libfuse 3.14 has no API for it, so the part of the kernel's ABI it takes is here,
// written from linux/fuse.h of Linux 6.9: the INIT flag and reply field by which a connection
// agrees to it, the ioctls that register a backing file with the connection, and the open reply
// that names one.
//
// The kernel's rules that shape its use (Linux 6.18): while an inode is open with passthrough,
// every open of it must name that same backing file (any other open fails with EIO, also after
// the daemon restarted); an inode open through the page cache cannot be passed through; a
// direct-I/O open of an inode with no backing file conflicts with neither.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>

#include "common/result.h"
#include "common/thread_annotations.h"

struct fuse_req;
typedef struct fuse_req* fuse_req_t;  // as libfuse declares it

namespace granary::cache::passthrough {

// A connection's agreement, made as libfuse answers the kernel's INIT: the session's reads and
// writes go through a Negotiation (a fuse_custom_io), which notes an INIT that offers
// passthrough and takes the offer in libfuse's reply. Requests and replies other than INIT's go
// through untouched.
class Negotiation {
 public:
  explicit Negotiation(bool wanted) : wanted_(wanted) {}

  // Notes an INIT request read from the connection (called with every request read).
  void sawRequest(const void* message, size_t size);
  // Writes one reply to the connection; INIT's with passthrough taken where it was offered.
  ssize_t writeReply(int fuseFd, const iovec* iov, int count);
  // Whether the kernel offered passthrough and this connection wants it (known once INIT was
  // read, before it is answered).
  bool offered() const { return initUnique_.load() != 0; }
  // Whether the reply took the offer (known once INIT was answered).
  bool agreed() const { return agreed_.load(); }

 private:
  const bool wanted_;
  std::atomic<uint64_t> initUnique_{0};  // the INIT request whose reply takes passthrough
  std::atomic<bool> agreed_{false};
};

// The backing files of a connection's open files, by inode: an inode's open files share one
// registration with the kernel, closed when the last of them is released. The kernel wants every
// open of an inode that has a backing file passed through to that very registration, also after
// a restart: the table lives in a file mapped shared (`open`), which a process that adopts the
// connection maps again, so that it opens those inodes as before and counts their releases.
// A kernel that refuses the first registration (no CAP_SYS_ADMIN, a cache directory stacked too
// deep) is taken to refuse them all: refused() then holds for good, and the connection passes
// nothing through, so that its opens may use the page cache. Thread-safe.
class BackingFiles {
 public:
  static constexpr uint32_t kSlots = 16384;  // inodes open at once with a backing file, at most

  BackingFiles();
  ~BackingFiles();
  BackingFiles(const BackingFiles&) = delete;
  BackingFiles& operator=(const BackingFiles&) = delete;

  // The table starts in memory, where a process that adopts the connection will not find it.
  // open() keeps it in `file` instead: emptied for a new connection, as left for an `adopted`
  // one (a table that is not there or not whole is empty). Without a file (or when it cannot be
  // mapped: Unavailable) it stays in memory, emptied.
  Status open(const std::filesystem::path& file, bool adopted);
  void setConnection(int fuseFd) { fuseFd_ = fuseFd; }
  // The backing id `inode`'s open files share, counted for one more open; none when it has none.
  std::optional<int32_t> share(uint64_t inode);
  // The same, else `file` registered with the kernel for `inode`, counted for one open.
  // Unavailable, with the kernel's reason, when it refuses; ResourceExhausted when kSlots inodes
  // have backing files.
  Result<int32_t> acquire(uint64_t inode, int file);
  // One open file of `inode` was released.
  void release(uint64_t inode);
  bool refused() const { return refused_.load(); }
  // That the connection agreed to passthrough, for a process adopting it; and whether it had.
  void recordAgreed();
  bool agreedBefore() const;

 private:
  struct Table;
  int fuseFd_ = -1;
  std::atomic<bool> refused_{false};
  mutable Mutex mutex_;
  Table* table_ GRANARY_GUARDED_BY(mutex_) = nullptr;   // mapped
  bool registered_ GRANARY_GUARDED_BY(mutex_) = false;  // the kernel took one
};

// Whether this kernel offers FUSE mounts passthrough, read from the FUSE_INIT of a scratch mount
// in `scratchDirectory` (created if missing, removed after) through `device`. OK, or
// FailedPrecondition saying why not. Takes milliseconds; touches nothing else.
Status probe(const std::filesystem::path& scratchDirectory,
             const std::filesystem::path& device = "/dev/fuse");

// Registers `file` with the connection `fuseFd` as a backing file (the kernel keeps its own
// reference: `file` may be closed after): its id, or Unavailable with the kernel's reason.
Result<int32_t> openBacking(int fuseFd, int file);
// Ends a registration; the kernel's files opened through it keep reading.
void closeBacking(int fuseFd, int32_t id);

// Answers an open with the kernel reading `backingId` directly; the file's handle is `handle`.
// False when the reply could not be sent (the request was interrupted).
bool replyOpen(fuse_req_t req, int32_t backingId, uint64_t handle);

}  // namespace granary::cache::passthrough
