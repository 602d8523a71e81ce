#define FUSE_USE_VERSION 314
#include "engine/mount/passthrough.h"

#include <fuse3/fuse_lowlevel.h>
#include <linux/fuse.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace granary::cache::passthrough {

namespace {

// From linux/fuse.h of Linux 6.9 (protocol 7.40), which Debian 12's headers predate.
constexpr uint64_t kInitPassthrough = uint64_t{1} << 37;        // FUSE_PASSTHROUGH
constexpr uint64_t kInitDirectIoAllowMmap = uint64_t{1} << 36;  // FUSE_DIRECT_IO_ALLOW_MMAP
constexpr uint64_t kInitExtended = uint64_t{1} << 30;           // FUSE_INIT_EXT
constexpr uint32_t kOpenPassthrough = 1u << 7;                  // FOPEN_PASSTHROUGH
// Backing files may lie on a stacked file system (overlayfs) but not deeper.
constexpr uint32_t kMaxStackDepth = 2;  // FILESYSTEM_MAX_STACK_DEPTH

struct BackingMap {  // struct fuse_backing_map
  int32_t fd;
  uint32_t flags;
  uint64_t padding;
};
constexpr unsigned long kBackingOpen = _IOW(229, 1, BackingMap);  // FUSE_DEV_IOC_BACKING_OPEN
constexpr unsigned long kBackingClose = _IOW(229, 2, uint32_t);   // FUSE_DEV_IOC_BACKING_CLOSE

struct OpenReply {  // struct fuse_open_out, its padding now the backing id
  uint64_t fh;
  uint32_t open_flags;
  int32_t backing_id;
};
static_assert(sizeof(OpenReply) == sizeof(fuse_open_out));

// struct fuse_init_out: flags2, then (since 7.40) max_stack_depth.
constexpr size_t kInitFlags2 = offsetof(fuse_init_out, flags2);
constexpr size_t kInitMaxStackDepth = kInitFlags2 + sizeof(uint32_t);

template <typename T>
T readAt(const char* bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes + offset, sizeof value);
  return value;
}

template <typename T>
void writeAt(char* bytes, size_t offset, T value) {
  std::memcpy(bytes + offset, &value, sizeof value);
}

}  // namespace

void Negotiation::sawRequest(const void* message, size_t size) {
  if (!wanted_ || initUnique_.load(std::memory_order_relaxed) != 0) return;
  const auto* bytes = static_cast<const char*>(message);
  if (size < sizeof(fuse_in_header) + offsetof(fuse_init_in, flags) + sizeof(uint32_t)) return;
  const auto header = readAt<fuse_in_header>(bytes, 0);
  if (header.opcode != FUSE_INIT) return;
  const char* init = bytes + sizeof(fuse_in_header);
  uint64_t flags = readAt<uint32_t>(init, offsetof(fuse_init_in, flags));
  if ((flags & kInitExtended) != 0 &&
      size >= sizeof(fuse_in_header) + offsetof(fuse_init_in, flags2) + sizeof(uint32_t))
    flags |= uint64_t{readAt<uint32_t>(init, offsetof(fuse_init_in, flags2))} << 32;
  if ((flags & kInitPassthrough) != 0) initUnique_ = header.unique;
}

ssize_t Negotiation::writeReply(int fuseFd, const iovec* iov, int count) {
  const uint64_t init = initUnique_.load(std::memory_order_relaxed);
  if (init == 0 || agreed_.load(std::memory_order_relaxed) || count < 1 ||
      iov[0].iov_len < sizeof(fuse_out_header) ||
      readAt<fuse_out_header>(static_cast<const char*>(iov[0].iov_base), 0).unique != init)
    return ::writev(fuseFd, iov, count);
  std::vector<char> reply;
  for (int i = 0; i < count; ++i) {
    const auto* base = static_cast<const char*>(iov[i].iov_base);
    reply.insert(reply.end(), base, base + iov[i].iov_len);
  }
  char* out = reply.data() + sizeof(fuse_out_header);
  const size_t body = reply.size() - sizeof(fuse_out_header);
  const auto header = readAt<fuse_out_header>(reply.data(), 0);
  const uint32_t flags =
      body >= sizeof(uint32_t) * 4 ? readAt<uint32_t>(out, offsetof(fuse_init_out, flags)) : 0;
  if (header.error == 0 && body >= kInitMaxStackDepth + sizeof(uint32_t) &&
      (flags & kInitExtended) != 0 && (flags & FUSE_WRITEBACK_CACHE) == 0) {
    const uint32_t flags2 =
        readAt<uint32_t>(out, kInitFlags2) |
        static_cast<uint32_t>((kInitPassthrough | kInitDirectIoAllowMmap) >> 32);
    writeAt(out, kInitFlags2, flags2);
    writeAt(out, kInitMaxStackDepth, kMaxStackDepth);
    agreed_ = true;
  }
  return ::write(fuseFd, reply.data(), reply.size());
}

Result<int32_t> BackingFiles::acquire(uint64_t inode, int file) {
  MutexLock lock(mutex_);
  if (auto it = byInode_.find(inode); it != byInode_.end()) {
    ++it->second.opens;
    return it->second.id;
  }
  if (refused_) return unavailable("the kernel refuses backing files on this connection");
  const BackingMap map{file, 0, 0};
  const int id = ::ioctl(fuseFd_, kBackingOpen, &map);
  if (id < 0) {
    const int error = errno;
    if (!registered_) refused_ = true;
    return unavailable(std::string("the kernel refused a backing file: ") + std::strerror(error));
  }
  registered_ = true;
  byInode_[inode] = Shared{id, 1};
  return id;
}

void BackingFiles::release(uint64_t inode) {
  MutexLock lock(mutex_);
  auto it = byInode_.find(inode);
  if (it == byInode_.end() || --it->second.opens > 0) return;
  const auto id = static_cast<uint32_t>(it->second.id);
  ::ioctl(fuseFd_, kBackingClose, &id);
  byInode_.erase(it);
}

bool replyOpen(fuse_req_t req, int32_t backingId, uint64_t handle) {
  const OpenReply reply{handle, kOpenPassthrough | FOPEN_NOFLUSH, backingId};
  return fuse_reply_buf(req, reinterpret_cast<const char*>(&reply), sizeof reply) == 0;
}

}  // namespace granary::cache::passthrough
