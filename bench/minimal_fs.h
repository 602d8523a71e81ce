// MinimalFilesystem: the floors of a read path through FUSE on this kernel, for mount_bench. It
// mounts a tree of named files of one size and does as little as a FUSE daemon can: a lookup is
// one hash lookup, and a file is read
//   kZeros        from a buffer of zeros: what the kernel's FUSE protocol alone costs, no disk;
//   kMirror       with one pread of the same file under a source directory: a daemon that only
//                 mirrors files, what FUSE and the disk cost together;
//   kPassthrough  by the kernel from that file (FUSE passthrough), registered at its first open
//                 and kept: what an open through FUSE costs at the least.
// Opens are declined (ENOSYS, as granary's page cache path declines them) but with passthrough.
// Mounted read-only with what granary's mounts ask in INIT and served by their request loop
// (askMountSettings, serveRequests), 64 threads at most. (granary also raises the mount's
// read_ahead_kb, which files under the kernel's 128 KiB default never reach.)
#pragma once

#define FUSE_USE_VERSION 314

#include <fcntl.h>
#include <fuse3/fuse_lowlevel.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/mount/dataset_fs.h"
#include "engine/mount/passthrough.h"

namespace granary::bench {

class MinimalFilesystem {
 public:
  enum Answer { kZeros, kMirror, kPassthrough };

  // Mounts `files` (paths relative to the root, each of `size` bytes) at `mountpoint`, answered
  // as `answer` says from the files of the same names below `source`; false when it cannot.
  bool mount(const std::filesystem::path& mountpoint, const std::vector<std::string>& files,
             int64_t size, Answer answer, const std::filesystem::path& source = {}) {
    answer_ = answer;
    size_ = size;
    zeros_.assign(static_cast<size_t>(std::min<int64_t>(size, 1 << 20)), '\0');
    isDirectory_ = {true, true};  // inode 1 is the root; 0 is unused
    sources_.resize(2);
    for (const auto& file : files) {
      const fuse_ino_t inode = add(file);
      sources_.resize(isDirectory_.size());
      if (answer != kZeros) sources_[inode] = (source / file).string();
    }
    backings_.assign(isDirectory_.size(), -1);
    mountpoint_ = mountpoint;
    const char* argv[] = {"granary-minimal", "-o",
                          "ro,default_permissions,subtype=granary-minimal"};
    fuse_args args = FUSE_ARGS_INIT(3, const_cast<char**>(argv));
    static const fuse_lowlevel_ops ops = [] {
      fuse_lowlevel_ops o{};
      o.init = [](void*, fuse_conn_info* conn) { cache::askMountSettings(conn); };
      o.lookup = onLookup;
      o.getattr = onGetattr;
      o.open = onOpen;
      o.release = onRelease;
      o.read = onRead;
      return o;
    }();
    session_ = fuse_session_new(&args, &ops, sizeof ops, this);
    fuse_opt_free_args(&args);
    if (session_ == nullptr || fuse_session_mount(session_, mountpoint.c_str()) != 0) return false;
    static const fuse_custom_io negotiating{writeReply, readRequest, nullptr, nullptr};
    if (answer == kPassthrough &&
        fuse_session_custom_io(session_, &negotiating, fuse_session_fd(session_)) != 0)
      return false;
    loop_ = std::thread([session = session_] { cache::serveRequests(session, 64); });
    return true;
  }

  ~MinimalFilesystem() {
    if (session_ == nullptr) return;
    ::umount2(mountpoint_.c_str(), MNT_DETACH);  // the threads read ENODEV and stop
    if (loop_.joinable()) loop_.join();
    fuse_session_destroy(session_);
  }

 private:
  fuse_ino_t add(const std::string& path) {
    fuse_ino_t parent = 1;
    size_t from = 0;
    for (;;) {
      const size_t slash = path.find('/', from);
      const bool last = slash == std::string::npos;
      const std::string name = path.substr(from, last ? std::string::npos : slash - from);
      const std::string key = std::to_string(parent) + "/" + name;
      auto found = byName_.find(key);
      if (found == byName_.end()) {
        isDirectory_.push_back(!last);
        found = byName_.emplace(key, isDirectory_.size() - 1).first;
      }
      if (last) return found->second;
      parent = found->second;
      from = slash + 1;
    }
  }

  struct stat attrOf(fuse_ino_t inode) const {
    struct stat st {};
    st.st_ino = inode;
    st.st_mode = isDirectory_[inode] ? S_IFDIR | 0555 : S_IFREG | 0444;
    st.st_nlink = 1;
    st.st_size = isDirectory_[inode] ? 0 : size_;
    return st;
  }

  static MinimalFilesystem& self(fuse_req_t req) {
    return *static_cast<MinimalFilesystem*>(fuse_req_userdata(req));
  }
  static void onLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    const MinimalFilesystem& fs = self(req);
    const auto found = fs.byName_.find(std::to_string(parent) + "/" + name);
    if (found == fs.byName_.end()) {
      fuse_reply_err(req, ENOENT);
      return;
    }
    fuse_entry_param e{};
    e.ino = found->second;
    e.attr = fs.attrOf(e.ino);
    e.attr_timeout = e.entry_timeout = 1e9;
    fuse_reply_entry(req, &e);
  }
  static void onGetattr(fuse_req_t req, fuse_ino_t inode, fuse_file_info*) {
    const MinimalFilesystem& fs = self(req);
    if (inode >= fs.isDirectory_.size()) {
      fuse_reply_err(req, ENOENT);
      return;
    }
    const struct stat st = fs.attrOf(inode);
    fuse_reply_attr(req, &st, 1e9);
  }
  static ssize_t readRequest(int fd, void* buffer, size_t size, void* userdata) {
    const ssize_t n = ::read(fd, buffer, size);
    if (n > 0)
      static_cast<MinimalFilesystem*>(userdata)->negotiation_.sawRequest(buffer,
                                                                         static_cast<size_t>(n));
    return n;
  }
  static ssize_t writeReply(int fd, iovec* iov, int count, void* userdata) {
    return static_cast<MinimalFilesystem*>(userdata)->negotiation_.writeReply(fd, iov, count);
  }
  static void onOpen(fuse_req_t req, fuse_ino_t inode, fuse_file_info* fi) {
    MinimalFilesystem& fs = self(req);
    if (fs.answer_ != kPassthrough || !fs.negotiation_.agreed())
      return (void)fuse_reply_err(req, ENOSYS);
    std::lock_guard lock(fs.backingsMutex_);
    int32_t& backing = fs.backings_[inode];
    if (backing < 0) {
      const int file = ::open(fs.sources_[inode].c_str(), O_RDONLY | O_CLOEXEC);
      const auto id = cache::passthrough::openBacking(fuse_session_fd(fs.session_), file);
      if (file >= 0) ::close(file);
      if (!id.isOk()) return (void)fuse_reply_err(req, EIO);
      backing = *id;
    }
    fi->fh = 1;
    cache::passthrough::replyOpen(req, backing, fi->fh);
  }
  static void onRelease(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }
  static void onRead(fuse_req_t req, fuse_ino_t inode, size_t size, off_t offset, fuse_file_info*) {
    const MinimalFilesystem& fs = self(req);
    const int64_t left = std::max<int64_t>(0, fs.size_ - offset);
    const size_t n = std::min({size, static_cast<size_t>(left), fs.zeros_.size()});
    if (fs.sources_[inode].empty()) {
      fuse_reply_buf(req, fs.zeros_.data(), n);
      return;
    }
    thread_local std::string buffer;
    buffer.resize(n);
    const int fd = ::open(fs.sources_[inode].c_str(), O_RDONLY | O_CLOEXEC);
    const ssize_t got = fd < 0 ? -1 : ::pread(fd, buffer.data(), n, offset);
    if (fd >= 0) ::close(fd);
    if (got < 0)
      fuse_reply_err(req, EIO);
    else
      fuse_reply_buf(req, buffer.data(), static_cast<size_t>(got));
  }

  Answer answer_ = kZeros;
  cache::passthrough::Negotiation negotiation_{true};
  std::mutex backingsMutex_;
  std::vector<int32_t> backings_;  // by inode: its backing id, registered at its first open
  int64_t size_ = 0;
  std::string zeros_;
  std::vector<bool> isDirectory_;                       // by inode
  std::vector<std::string> sources_;                    // by inode: the file read, or empty (zeros)
  std::unordered_map<std::string, fuse_ino_t> byName_;  // "parent inode/name"
  std::filesystem::path mountpoint_;
  fuse_session* session_ = nullptr;
  std::thread loop_;
};

}  // namespace granary::bench
