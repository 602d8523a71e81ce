// file:// origins: a directory the node can read, and nothing outside the root it lies in. Every
// open goes through openBeneath() from a descriptor of the root, never through a path the kernel
// resolves freely, so a component swapped for a symlink after the source was checked is refused.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "common/owned_fd.h"
#include "engine/origin/beneath.h"
#include "engine/origin/origin.h"

namespace granary::cache {
namespace {

constexpr size_t kBatch = 4096;

std::string etagOf(const struct stat& st) {
  return std::to_string(st.st_size) + "-" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

bool leadsOut(int error) { return error == EXDEV || error == ELOOP; }

Status refused(std::string message) { return {StatusCode::kPermissionDenied, std::move(message)}; }

class FileOrigin final : public Origin {
 public:
  FileOrigin(std::filesystem::path root, std::string relative)
      : root_(std::move(root)), relative_(std::move(relative)) {}

  Status list(const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    const OwnedFd root(openRoot());
    if (root.get() < 0) return unavailable("cannot open " + root_.string() + ": " + lastError());
    const int dir = openBeneath(root.get(), relative_, O_RDONLY | O_DIRECTORY);
    if (dir < 0) {
      if (leadsOut(-dir)) return refused(source() + " now leads outside " + root_.string());
      if (-dir == ENOENT)
        return unavailable("file:// source " + source() + " does not exist on this node (yet)");
      return unavailable("cannot list " + source() + ": " + std::strerror(-dir));
    }
    Listing listing{root.get(), each, {}, 0};
    GRANARY_RETURN_IF_ERROR(walk(listing, dir, ""));
    if (!listing.batch.empty()) GRANARY_RETURN_IF_ERROR(each(std::move(listing.batch)));
    if (listing.leadingOut > 0) {
      Logger("origin").warn(
          "symlinks leading outside the root left out of the listing",
          {{"source", source()}, {"root", root_.string()}, {"symlinks", listing.leadingOut}});
    }
    return Status::ok();
  }

  Result<std::string> read(const std::string& path, int64_t offset, int64_t length,
                           const std::string& etag) override {
    if (!isPlainRelativePath(path))
      return invalidArgument("\"" + path + "\" is not a path below the source");
    const std::string file = source() + "/" + path;
    const OwnedFd root(openRoot());
    if (root.get() < 0) return unavailable("cannot open " + root_.string() + ": " + lastError());
    const int opened =
        openBeneath(root.get(), below(path), O_RDONLY | O_NONBLOCK | O_NOCTTY);  // FIFOs: no wait
    if (opened < 0) {
      if (-opened == ENOENT || -opened == ENOTDIR)
        return notFound(file + " is gone from the origin");
      if (leadsOut(-opened))
        return refused(file + " leads outside " + root_.string() + "; refused");
      return unavailable("cannot open " + file + ": " + std::strerror(-opened));
    }
    const OwnedFd fd(opened);
    struct stat before {};
    if (::fstat(fd.get(), &before) != 0 || !S_ISREG(before.st_mode))
      return failedPrecondition(path + " is no longer a file at the origin");
    if (!etag.empty() && etagOf(before) != etag) {
      return failedPrecondition(path + " changed at the origin since it was listed");
    }
    std::string data(
        static_cast<size_t>(std::max<int64_t>(0, std::min(length, before.st_size - offset))), '\0');
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = ::pread(fd.get(), data.data() + done, data.size() - done,
                                offset + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        return n == 0 ? failedPrecondition(path + " shrank at the origin while being read")
                      : unavailable("cannot read " + file + ": " + std::strerror(errno));
      }
      done += static_cast<size_t>(n);
    }
    struct stat after {};
    ::fstat(fd.get(), &after);
    if (!etag.empty() && etagOf(after) != etag) {
      return failedPrecondition(path + " changed at the origin while being read");
    }
    return data;
  }

 private:
  struct Listing {
    int rootFd;
    const std::function<Status(std::vector<OriginObject>&&)>& each;
    std::vector<OriginObject> batch;
    int64_t leadingOut;
  };

  static std::string lastError() { return std::strerror(errno); }

  std::string source() const {
    return relative_.empty() ? root_.string() : (root_ / relative_).string();
  }
  // A path below the source as a path below the root.
  std::string below(const std::string& path) const {
    return relative_.empty() ? path : relative_ + "/" + path;
  }
  int openRoot() const { return ::open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC); }

  // Lists the directory `dirFd` (taken over and closed), `prefix` below the source.
  Status walk(Listing& listing, int dirFd, const std::string& prefix) {
    DIR* dir = ::fdopendir(dirFd);
    if (dir == nullptr) {
      ::close(dirFd);
      return unavailable("cannot list " + source() + "/" + prefix + ": " + std::strerror(errno));
    }
    const auto closeDir = [](DIR* d) { ::closedir(d); };
    const std::unique_ptr<DIR, decltype(closeDir)> owned(dir, closeDir);
    while (true) {
      errno = 0;
      const dirent* entry = ::readdir(dir);
      if (entry == nullptr) {
        if (errno != 0)
          return unavailable("cannot list " + source() + "/" + prefix + ": " +
                             std::strerror(errno));
        return Status::ok();
      }
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      const std::string path = prefix.empty() ? name : prefix + "/" + name;
      struct stat st {};
      if (::fstatat(::dirfd(dir), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(st.st_mode)) {
        const int sub =
            ::openat(::dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
          if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;  // changed meanwhile
          return unavailable("cannot list " + source() + "/" + path + ": " + std::strerror(errno));
        }
        GRANARY_RETURN_IF_ERROR(walk(listing, sub, path));
        continue;
      }
      if (S_ISLNK(st.st_mode)) {
        // Read through while it stays beneath the root, as every later read will be.
        const int target = openBeneath(listing.rootFd, below(path), O_PATH);
        if (target < 0) {
          if (leadsOut(-target)) ++listing.leadingOut;
          continue;
        }
        const OwnedFd held(target);
        if (::fstat(target, &st) != 0) continue;
      }
      if (!S_ISREG(st.st_mode)) continue;
      OriginObject object;
      object.path = path;
      object.size = st.st_size;
      object.etag = etagOf(st);
      object.modifiedUnixNanos =
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
      object.mode = st.st_mode & 0777;
      listing.batch.push_back(std::move(object));
      if (listing.batch.size() == kBatch) {
        GRANARY_RETURN_IF_ERROR(listing.each(std::move(listing.batch)));
        listing.batch.clear();
      }
    }
  }

  std::filesystem::path root_;  // canonical
  std::string relative_;        // the source below it; "" for the root itself
};

}  // namespace

Result<std::unique_ptr<Origin>> makeFileOrigin(const std::filesystem::path& root,
                                               const std::filesystem::path& relative) {
  const std::string below = relative.lexically_normal().generic_string();
  const std::string shown = below.empty() || below == "." ? root.string() : (root / below).string();
  if (!below.empty() && below != "." && !isPlainRelativePath(below))
    return invalidArgument("file:// source " + shown + " is not a plain path below " +
                           root.string());
  const OwnedFd rootFd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  const int dir = rootFd.get() < 0
                      ? -errno
                      : openBeneath(rootFd.get(), below == "." ? "" : below, O_PATH | O_DIRECTORY);
  // A directory that does not exist yet (an export mounted later) is awaited: list() says so
  // until it appears. One that leads out, or is a file, can never be a source.
  if (dir == -ENOENT)
    return std::unique_ptr<Origin>(new FileOrigin(root, below == "." ? "" : below));
  if (dir < 0)
    return invalidArgument("file:// source " + shown + " is not a directory on this node");
  ::close(dir);
  return std::unique_ptr<Origin>(new FileOrigin(root, below == "." ? "" : below));
}

Result<std::unique_ptr<Origin>> makeFileOrigin(const std::string& root) {
  std::error_code error;
  const std::filesystem::path canonical = std::filesystem::canonical(root, error);
  if (error || !std::filesystem::is_directory(canonical, error)) {
    return invalidArgument("file:// source " + root + " is not a directory on this node");
  }
  return makeFileOrigin(canonical, "");
}

}  // namespace granary::cache
