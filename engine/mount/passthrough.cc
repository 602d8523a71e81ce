#define FUSE_USE_VERSION 314
#include "engine/mount/passthrough.h"

#include <fcntl.h>
#include <fuse3/fuse_lowlevel.h>
#include <linux/fuse.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "common/owned_fd.h"
#include "engine/mount/scratch_mount.h"

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

// Whether `message` is a FUSE_INIT that offers passthrough.
bool offersPassthrough(const char* message, size_t size) {
  if (size < sizeof(fuse_in_header) + offsetof(fuse_init_in, flags) + sizeof(uint32_t))
    return false;
  if (readAt<fuse_in_header>(message, 0).opcode != FUSE_INIT) return false;
  const char* init = message + sizeof(fuse_in_header);
  uint64_t flags = readAt<uint32_t>(init, offsetof(fuse_init_in, flags));
  if ((flags & kInitExtended) != 0 &&
      size >= sizeof(fuse_in_header) + offsetof(fuse_init_in, flags2) + sizeof(uint32_t))
    flags |= uint64_t{readAt<uint32_t>(init, offsetof(fuse_init_in, flags2))} << 32;
  return (flags & kInitPassthrough) != 0;
}

}  // namespace

void Negotiation::sawRequest(const void* message, size_t size) {
  if (!wanted_ || initUnique_.load(std::memory_order_relaxed) != 0) return;
  const auto* bytes = static_cast<const char*>(message);
  if (offersPassthrough(bytes, size)) initUnique_ = readAt<fuse_in_header>(bytes, 0).unique;
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

// The table: a header, then slots by inode, open addressing with linear probing and deletion
// by shifting back (no tombstones). Inode 0 marks a free slot (FUSE has no inode 0).
struct BackingFiles::Table {
  static constexpr uint64_t kMagic = 0x67726e7970743031;  // "grnypt01"
  struct Slot {
    uint64_t inode;
    int32_t id;
    int32_t opens;
  };
  uint64_t magic;
  uint32_t slots;
  uint32_t agreed;
  Slot slot[kSlots];

  uint32_t home(uint64_t inode) const {
    return static_cast<uint32_t>(XXH3_64bits(&inode, 8) % kSlots);
  }
  // The slot holding `inode`, else the free one where it would go; null when full.
  Slot* find(uint64_t inode) {
    for (uint32_t i = home(inode), n = 0; n < kSlots; ++n, i = (i + 1) % kSlots)
      if (slot[i].inode == inode || slot[i].inode == 0) return &slot[i];
    return nullptr;
  }
  void erase(Slot* gone) {
    auto hole = static_cast<uint32_t>(gone - slot);
    for (uint32_t j = (hole + 1) % kSlots; slot[j].inode != 0; j = (j + 1) % kSlots) {
      const uint32_t k = home(slot[j].inode);
      // Moves back an entry whose home is not in (hole, j], cyclically.
      const bool between = hole < j ? (k > hole && k <= j) : (k > hole || k <= j);
      if (!between) {
        slot[hole] = slot[j];
        hole = j;
      }
    }
    slot[hole] = Slot{};
  }
};

BackingFiles::BackingFiles() { (void)open({}, false); }

BackingFiles::~BackingFiles() {
  MutexLock lock(mutex_);
  if (table_ != nullptr) ::munmap(table_, sizeof(Table));
}

Status BackingFiles::open(const std::filesystem::path& file, bool adopted) {
  Status kept = Status::ok();
  void* memory = MAP_FAILED;
  if (!file.empty()) {
    const OwnedFd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    struct stat st {};
    const bool whole = fd && ::fstat(fd.get(), &st) == 0 && st.st_size == sizeof(Table);
    if (fd && (!adopted || !whole) && ::ftruncate(fd.get(), 0) == 0)  // emptied
      (void)::ftruncate(fd.get(), sizeof(Table));
    if (fd)
      memory = ::mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (memory == MAP_FAILED)
      kept = unavailable("cannot map " + file.string() + ": " + std::strerror(errno));
  }
  if (memory == MAP_FAILED)
    memory =
        ::mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto* table = static_cast<Table*>(memory);
  if (table->magic != Table::kMagic || table->slots != kSlots) {
    std::memset(static_cast<void*>(table), 0, sizeof(Table));
    table->slots = kSlots;
    table->magic = Table::kMagic;
  }
  MutexLock lock(mutex_);
  if (table_ != nullptr) ::munmap(table_, sizeof(Table));
  table_ = table;
  return kept;
}

std::optional<int32_t> BackingFiles::share(uint64_t inode) {
  MutexLock lock(mutex_);
  Table::Slot* slot = table_->find(inode);
  if (slot == nullptr || slot->inode != inode) return std::nullopt;
  ++slot->opens;
  return slot->id;
}

Result<int32_t> BackingFiles::acquire(uint64_t inode, int file) {
  MutexLock lock(mutex_);
  Table::Slot* slot = table_->find(inode);
  if (slot == nullptr)
    return Status(StatusCode::kResourceExhausted, "too many files open with passthrough");
  if (slot->inode == inode) {
    ++slot->opens;
    return slot->id;
  }
  if (refused_) return unavailable("the kernel refuses backing files on this connection");
  const Result<int32_t> id = openBacking(fuseFd_, file);
  if (!id.isOk()) {
    if (!registered_) refused_ = true;
    return id.status();
  }
  registered_ = true;
  *slot = Table::Slot{inode, *id, 1};
  return *id;
}

void BackingFiles::release(uint64_t inode) {
  MutexLock lock(mutex_);
  Table::Slot* slot = table_->find(inode);
  if (slot == nullptr || slot->inode != inode || --slot->opens > 0) return;
  closeBacking(fuseFd_, slot->id);
  table_->erase(slot);
}

void BackingFiles::recordAgreed() {
  MutexLock lock(mutex_);
  table_->agreed = 1;
}

bool BackingFiles::agreedBefore() const {
  MutexLock lock(mutex_);
  return table_->agreed != 0;
}

Status probe(const std::filesystem::path& scratchDirectory, const std::filesystem::path& device) {
  ScratchFuseMount scratch(scratchDirectory / ".passthrough-probe");
  GRANARY_RETURN_IF_ERROR(scratch.mount(device));
  std::vector<char> init(1 << 16);  // the kernel queued its FUSE_INIT when it mounted
  const ssize_t n = ::read(scratch.fd(), init.data(), init.size());
  if (n < 0)
    return failedPrecondition(std::string("cannot read a FUSE mount's INIT: ") +
                              std::strerror(errno));
  if (offersPassthrough(init.data(), static_cast<size_t>(n))) return Status::ok();
  utsname name{};
  ::uname(&name);
  return failedPrecondition(std::string("kernel ") + name.release +
                            " offers FUSE mounts no passthrough (Linux 6.9+, "
                            "CONFIG_FUSE_PASSTHROUGH)");
}

Result<int32_t> openBacking(int fuseFd, int file) {
  const BackingMap map{file, 0, 0};
  const int id = ::ioctl(fuseFd, kBackingOpen, &map);
  if (id < 0)
    return unavailable(std::string("the kernel refused a backing file: ") + std::strerror(errno));
  return id;
}

void closeBacking(int fuseFd, int32_t id) {
  const auto closed = static_cast<uint32_t>(id);
  ::ioctl(fuseFd, kBackingClose, &closed);
}

bool replyOpen(fuse_req_t req, int32_t backingId, uint64_t handle) {
  const OpenReply reply{handle, kOpenPassthrough | FOPEN_NOFLUSH, backingId};
  return fuse_reply_buf(req, reinterpret_cast<const char*>(&reply), sizeof reply) == 0;
}

}  // namespace granary::cache::passthrough
