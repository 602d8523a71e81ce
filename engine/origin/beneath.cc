#include "engine/origin/beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <deque>
#include <string>

namespace granary::cache {
namespace {

// As the kernel's limit on symlinks followed in one resolution (MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;
// openat2 answers EAGAIN when a rename or mount raced with a RESOLVE_BENEATH resolution.
constexpr int kKernelRetries = 16;

int closeReturning(int fd, int result) {
  ::close(fd);
  return result;
}

std::deque<std::string> segmentsOf(std::string_view path) {
  std::deque<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    if (slash > start) out.emplace_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

int openat2Beneath(int rootFd, std::string_view relative, int flags) {
  const std::string path = relative.empty() ? std::string(".") : std::string(relative);
  struct open_how how {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    const long fd = ::syscall(SYS_openat2, rootFd, path.c_str(), &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EAGAIN || attempt == kKernelRetries) return -errno;
  }
}

// The directories walked so far below the root, each an O_PATH descriptor owned here. ".." pops
// one: the walk never asks the file system for a parent, so a directory moved meanwhile cannot
// lead it out.
class DirectoryStack {
 public:
  explicit DirectoryStack(int rootFd) : rootFd_(rootFd) {}
  DirectoryStack(const DirectoryStack&) = delete;
  DirectoryStack& operator=(const DirectoryStack&) = delete;
  ~DirectoryStack() {
    for (int fd : fds_) ::close(fd);
  }
  int current() const { return fds_.empty() ? rootFd_ : fds_.back(); }
  void push(int fd) { fds_.push_back(fd); }
  bool pop() {
    if (fds_.empty()) return false;
    ::close(fds_.back());
    fds_.pop_back();
    return true;
  }

 private:
  int rootFd_;
  std::vector<int> fds_;
};

int walkBeneath(int rootFd, std::string_view relative, int flags) {
  std::deque<std::string> pending = segmentsOf(relative);
  DirectoryStack stack(rootFd);
  int links = 0;
  while (!pending.empty()) {
    const std::string name = std::move(pending.front());
    pending.pop_front();
    if (name == ".") continue;
    if (name == "..") {
      if (!stack.pop()) return -EXDEV;
      continue;
    }
    const int fd = ::openat(stack.current(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st {};
    if (::fstat(fd, &st) != 0) return closeReturning(fd, -errno);
    if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxSymlinks) return closeReturning(fd, -ELOOP);
      char target[PATH_MAX];
      const ssize_t n = ::readlinkat(fd, "", target, sizeof target);
      const int error = errno;
      ::close(fd);
      if (n < 0) return -error;
      if (n == 0 || static_cast<size_t>(n) == sizeof target) return -ENAMETOOLONG;
      const std::string_view link(target, static_cast<size_t>(n));
      if (link.front() == '/') return -EXDEV;  // absolute: the kernel refuses these too
      std::deque<std::string> spliced = segmentsOf(link);
      pending.insert(pending.begin(), spliced.begin(), spliced.end());
      continue;
    }
    if (!pending.empty()) {
      if (!S_ISDIR(st.st_mode)) return closeReturning(fd, -ENOTDIR);
      stack.push(fd);
      continue;
    }
    // The last component, no symlink when classified. Opened again with the caller's flags
    // (O_NOFOLLOW: a symlink swapped in meanwhile fails), and it must be the same inode.
    const int out = ::openat(stack.current(), name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC);
    if (out < 0) {
      const int error = errno;
      ::close(fd);
      const bool swapped = error == ELOOP || (error == ENOTDIR && S_ISDIR(st.st_mode));
      if (!swapped) return -error;
      if (++links > kMaxSymlinks) return -ELOOP;
      pending.push_front(name);  // swapped for a symlink: resolve it as one
      continue;
    }
    struct stat opened {};
    const bool same =
        ::fstat(out, &opened) == 0 && opened.st_dev == st.st_dev && opened.st_ino == st.st_ino;
    ::close(fd);
    if (same) return out;
    ::close(out);
    if (++links > kMaxSymlinks) return -ELOOP;
    pending.push_front(name);  // replaced meanwhile: classify it again
  }
  // The path ended on a directory ("", "." or a trailing ".."): open that directory.
  return [&] {
    const int fd = ::openat(stack.current(), ".", flags | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
  }();
}

}  // namespace

bool isWithin(const std::filesystem::path& path, const std::filesystem::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // the empty last element of a root with a trailing '/'
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

std::optional<BeneathRoot> locateBeneath(const std::filesystem::path& path,
                                         const std::vector<std::filesystem::path>& roots) {
  std::error_code error;
  std::filesystem::path resolved =
      std::filesystem::weakly_canonical(path, error).lexically_normal();
  if (error || !resolved.is_absolute()) return std::nullopt;
  if (resolved.has_relative_path() && !resolved.has_filename()) resolved = resolved.parent_path();
  std::optional<BeneathRoot> best;
  for (const auto& root : roots) {
    if (!root.is_absolute()) continue;
    const std::filesystem::path canonical = std::filesystem::canonical(root, error);
    if (error || !isWithin(resolved, canonical)) continue;
    if (best && best->root.string().size() >= canonical.string().size()) continue;
    std::filesystem::path relative = resolved.lexically_relative(canonical);
    if (relative == ".") relative.clear();
    best = BeneathRoot{canonical, relative};
  }
  return best;
}

bool isPlainRelativePath(std::string_view path) {
  if (path.empty() || path.front() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view segment = path.substr(start, slash - start);
    if (segment.empty() || segment == "." || segment == ".." ||
        segment.find('\0') != std::string_view::npos)
      return false;
    start = slash + 1;
  }
  return true;
}

bool kernelResolvesBeneath() {
  static const bool available = [] {
    // ENOSYS before Linux 5.6; EPERM where a seccomp filter older than the call refuses it.
    const int fd = openat2Beneath(AT_FDCWD, ".", O_PATH);
    if (fd < 0) return false;
    ::close(fd);
    return true;
  }();
  return available;
}

int openBeneath(int rootFd, std::string_view relative, int flags, BeneathResolver resolver) {
  if (resolver == BeneathResolver::kAuto)
    resolver = kernelResolvesBeneath() ? BeneathResolver::kKernel : BeneathResolver::kWalk;
  if (resolver == BeneathResolver::kKernel) return openat2Beneath(rootFd, relative, flags);
  return walkBeneath(rootFd, relative, flags);
}

}  // namespace granary::cache
