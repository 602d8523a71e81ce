// file:// origins: a directory the node can read, and nothing outside the root it lies in. Every
// open goes through openBeneath() from a descriptor of the root, never through a path the kernel
// resolves freely, so a component swapped for a symlink after the source was checked is refused.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "common/log.h"
#include "common/owned_fd.h"
#include "engine/origin/beneath.h"
#include "engine/origin/origin.h"

namespace granary::cache {
namespace {

// Files a batch. A page of a tree walked from the page cache comes in about 3 ms, sooner than the
// listing pace's 10 ms (core/listing_pace.h), so a warm tree is walked by one lister, its keys
// stored in order; a cold one, whose pages wait for the disk, gets more listers side by side.
// Each lister holds a few pages in flight: small pages keep that memory small.
constexpr size_t kBatch = 1024;

std::string etagOf(const struct stat& st) {
  return std::to_string(st.st_size) + "-" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

bool leadsOut(int error) { return error == EXDEV || error == ELOOP; }

Status refused(std::string message) { return {StatusCode::kPermissionDenied, std::move(message)}; }

// The entries of one directory in the byte order of the paths they lead to: a subdirectory's
// name with '/' appended (every path below it sorts as that prefix does), any other name as it
// is. Held in one buffer: a directory of a million entries costs a few tens of MB while it is
// walked, not a string each.
class SortedNames {
 public:
  void add(std::string_view name, bool directory) {
    starts_.push_back(static_cast<uint32_t>(names_.size()));
    names_.append(name);
    if (directory) names_ += '/';
    names_ += '\0';
  }
  void sort() {
    std::sort(starts_.begin(), starts_.end(),
              [&](uint32_t a, uint32_t b) { return at(a) < at(b); });
  }
  size_t size() const { return starts_.size(); }
  // NUL-terminated: data() can be passed to the kernel.
  std::string_view operator[](size_t i) const { return at(starts_[i]); }

 private:
  std::string_view at(uint32_t start) const { return names_.c_str() + start; }

  std::string names_;             // each name, NUL-terminated
  std::vector<uint32_t> starts_;  // where each begins in names_
};

class FileOrigin final : public Origin {
 public:
  FileOrigin(std::filesystem::path root, std::string relative)
      : root_(std::move(root)), relative_(std::move(relative)) {}

  Status list(const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    return listRange({}, each);
  }
  // The walk visits each directory's entries in the byte order of the paths they lead to, so it
  // lists in key order as S3 does: the manifest store takes a run of neighbouring keys at a
  // time, a listing cut short goes on where it stood, and parts are listed side by side.
  bool listsInKeyOrder() const override { return true; }

  // Cut at the source's top-level directories.
  Result<std::vector<KeyRange>> split(size_t parts) override {
    if (parts < 2) return std::vector<KeyRange>{KeyRange{}};
    GRANARY_ASSIGN_OR_RETURN(const int opened, openSource());
    const OwnedFd dir(opened);
    SortedNames names;
    GRANARY_RETURN_IF_ERROR(readNames(dir.get(), "", names));
    std::vector<std::string> directories;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i].ends_with('/')) directories.emplace_back(names[i]);
    return splitAtDirectories(directories, parts);
  }

  Status listRange(const KeyRange& range,
                   const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    const OwnedFd root(openRoot());
    if (root.get() < 0) return unavailable("cannot open " + root_.string() + ": " + lastError());
    GRANARY_ASSIGN_OR_RETURN(const int dir, openSource(root.get()));
    Listing listing{.rootFd = root.get(), .range = range, .each = each};
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
    const KeyRange& range;
    const std::function<Status(std::vector<OriginObject>&&)>& each;
    std::vector<OriginObject> batch = {};
    int64_t leadingOut = 0;
    bool past = false;  // a path beyond range.through was reached: nothing after it is listed
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

  // The source directory, opened for reading beneath `rootFd` (the caller closes it).
  Result<int> openSource(int rootFd) const {
    const int dir = openBeneath(rootFd, relative_, O_RDONLY | O_DIRECTORY);
    if (dir >= 0) return dir;
    if (leadsOut(-dir)) return refused(source() + " now leads outside " + root_.string());
    if (-dir == ENOENT)
      return unavailable("file:// source " + source() + " does not exist on this node (yet)");
    return unavailable("cannot list " + source() + ": " + std::strerror(-dir));
  }
  Result<int> openSource() const {
    const OwnedFd root(openRoot());
    if (root.get() < 0) return unavailable("cannot open " + root_.string() + ": " + lastError());
    return openSource(root.get());
  }

  // Reads the names in the directory `dirFd` (borrowed), `prefix` below the source ("" or ending
  // in '/').
  Status readNames(int dirFd, const std::string& prefix, SortedNames& names) const {
    const int own = ::fcntl(dirFd, F_DUPFD_CLOEXEC, 0);  // closedir() closes what it reads
    DIR* dir = own < 0 ? nullptr : ::fdopendir(own);
    if (dir == nullptr) {
      if (own >= 0) ::close(own);
      return unavailable("cannot list " + source() + "/" + prefix + ": " + lastError());
    }
    const auto closeDir = [](DIR* d) { ::closedir(d); };
    const std::unique_ptr<DIR, decltype(closeDir)> owned(dir, closeDir);
    for (;;) {
      errno = 0;
      const dirent* entry = ::readdir(dir);
      if (entry == nullptr) break;
      const std::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      bool directory = entry->d_type == DT_DIR;
      if (entry->d_type == DT_UNKNOWN) {  // a file system that does not say: ask
        struct stat st {};
        directory = ::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISDIR(st.st_mode);
      }
      names.add(name, directory);
    }
    if (errno != 0)
      return unavailable("cannot list " + source() + "/" + prefix + ": " + lastError());
    names.sort();
    return Status::ok();
  }

  // Lists the directory `dirFd` (taken over and closed), `prefix` below the source ("" or
  // ending in '/'), in key order, within listing.range.
  Status walk(Listing& listing, int dirFd, const std::string& prefix) {
    const OwnedFd dir(dirFd);
    SortedNames names;
    GRANARY_RETURN_IF_ERROR(readNames(dir.get(), prefix, names));
    const KeyRange& range = listing.range;
    for (size_t i = 0; i < names.size() && !listing.past; ++i) {
      const std::string path = prefix + std::string(names[i]);
      if (!range.through.empty() && path > range.through) {
        listing.past = true;  // a directory's prefix, or a file, beyond the range: so is the rest
        break;
      }
      if (path.ends_with('/')) {
        // A directory: every path below it starts with `path`; none is in the range where
        // range.after sorts after all of them.
        if (range.after > path && !range.after.starts_with(path)) continue;
        const std::string name = path.substr(prefix.size(), path.size() - prefix.size() - 1);
        const int sub =
            ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
          if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;  // changed meanwhile
          return unavailable("cannot list " + source() + "/" + path + ": " + lastError());
        }
        GRANARY_RETURN_IF_ERROR(walk(listing, sub, path));
        continue;
      }
      if (path <= range.after) continue;
      GRANARY_RETURN_IF_ERROR(listFile(listing, dir.get(), path, names[i].data()));
    }
    return Status::ok();
  }

  // Adds the file `name` (NUL-terminated) of the directory `dirFd`, `path` below the source, to
  // the batch, where it is a regular file or a symlink to one that stays beneath the root.
  Status listFile(Listing& listing, int dirFd, const std::string& path, const char* name) {
    struct stat st {};
    if (::fstatat(dirFd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return Status::ok();
    if (S_ISLNK(st.st_mode)) {
      // Read through while it stays beneath the root, as every later read will be.
      const int target = openBeneath(listing.rootFd, below(path), O_PATH);
      if (target < 0) {
        if (leadsOut(-target)) ++listing.leadingOut;
        return Status::ok();
      }
      const OwnedFd held(target);
      if (::fstat(target, &st) != 0) return Status::ok();
    }
    if (!S_ISREG(st.st_mode)) return Status::ok();
    listing.batch.push_back(
        {.path = path,
         .size = st.st_size,
         .etag = etagOf(st),
         .modifiedUnixNanos =
             static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
         .mode = st.st_mode & 0777});
    if (listing.batch.size() < kBatch) return Status::ok();
    GRANARY_RETURN_IF_ERROR(listing.each(std::move(listing.batch)));
    listing.batch.clear();
    return Status::ok();
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
