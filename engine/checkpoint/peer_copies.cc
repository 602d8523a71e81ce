#include "engine/checkpoint/peer_copies.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "common/errno_status.h"
#include "common/owned_fd.h"
#include "engine/checkpoint/tree_watch.h"
#include "engine/core/manifest_path.h"

namespace granary::checkpoint {
namespace {

// The directory of `path` in the tree, made when `create`; InvalidArgument when one on the way is
// not a directory (a symbolic link included), NotFound when one is missing and not `create`.
Result<std::filesystem::path> directoryOf(const std::filesystem::path& tree,
                                          const std::string& path, bool create) {
  GRANARY_RETURN_IF_ERROR(cache::validateManifestPath(path));
  std::filesystem::path directory = tree;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  for (const auto& segment : parent) {
    directory /= segment;
    struct stat st {};
    if (::lstat(directory.c_str(), &st) != 0) {
      if (errno != ENOENT) return errnoStatus(errno, "cannot look at " + directory.string());
      if (!create) return notFound(directory.string() + " is gone");
      if ((::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST) ||
          ::lstat(directory.c_str(), &st) != 0)
        return errnoStatus(errno, "cannot create " + directory.string());
    }
    if (!S_ISDIR(st.st_mode))
      return invalidArgument(path + ": " + directory.string() + " is not a directory of the tree");
  }
  return directory;
}

std::filesystem::path stagedName(const std::filesystem::path& staging) {
  static std::atomic<uint64_t> next{0};
  return staging / ("copy-" + std::to_string(::getpid()) + "-" + std::to_string(next++));
}

// Removes the directories between `path`'s and the tree's root that are empty.
void removeEmptyDirectories(const std::filesystem::path& tree, const std::string& path) {
  for (std::filesystem::path d = std::filesystem::path(path).parent_path(); !d.empty();
       d = d.parent_path())
    if (::rmdir((tree / d).c_str()) != 0) return;
}

// Renames `staged` to `path` in the tree. A directory on the way that the removal of another copy
// emptied and took away meanwhile is made again.
Status moveIntoTree(const std::filesystem::path& tree, const std::string& path,
                    const std::filesystem::path& staged) {
  for (int attempt = 1;; ++attempt) {
    GRANARY_ASSIGN_OR_RETURN(const std::filesystem::path directory, directoryOf(tree, path, true));
    const std::filesystem::path target = directory / std::filesystem::path(path).filename();
    if (::rename(staged.c_str(), target.c_str()) == 0) return Status::ok();
    if (errno != ENOENT || attempt == 3)
      return errnoStatus(errno, "cannot place " + path + " in the tree");
  }
}

}  // namespace

Status placeCopy(const CopyPlaces& places, Drainer& drainer, const PeerCopy& copy,
                 const std::function<Status(int fd)>& fill) {
  GRANARY_ASSIGN_OR_RETURN(const std::filesystem::path directory,
                           directoryOf(places.tree, copy.path, true));
  const std::filesystem::path target = directory / std::filesystem::path(copy.path).filename();
  struct stat current {};
  if (::lstat(target.c_str(), &current) == 0 && S_ISREG(current.st_mode) &&
      identityOf(current).modifiedNanos > copy.source.modifiedNanos)
    return Status::ok();  // written here since: this node's version wins
  std::error_code error;
  std::filesystem::create_directories(places.staging, error);
  const std::filesystem::path staged = stagedName(places.staging);
  OwnedFd fd(::open(staged.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) return errnoStatus(errno, "cannot stage a copy in " + places.staging.string());
  Status placed = fill(fd.get());
  const struct timespec times[2] = {{.tv_sec = 0, .tv_nsec = UTIME_OMIT},
                                    {.tv_sec = copy.source.modifiedNanos / 1'000'000'000,
                                     .tv_nsec = copy.source.modifiedNanos % 1'000'000'000}};
  struct stat st {};
  if (placed.isOk() &&
      (::fsync(fd.get()) != 0 || ::futimens(fd.get(), times) != 0 || ::fstat(fd.get(), &st) != 0))
    placed = errnoStatus(errno, "cannot sync the copy of " + copy.path);
  if (placed.isOk() && st.st_size != copy.source.size)
    placed = corruption(copy.path + ": " + std::to_string(st.st_size) + " bytes came of " +
                        std::to_string(copy.source.size));
  if (placed.isOk()) {
    drainer.copyArriving(copy.path, identityOf(st), copy.writer, copy.source, copy.atOrigin);
    placed = moveIntoTree(places.tree, copy.path, staged);
  }
  if (!placed.isOk()) ::unlink(staged.c_str());
  return placed;
}

Status removeCopy(const std::filesystem::path& tree, Drainer& drainer, const std::string& writer,
                  const std::string& path) {
  const std::optional<FileIdentity> placed = drainer.copyOf(writer, path, false);
  if (!placed) return Status::ok();
  auto directory = directoryOf(tree, path, false);
  if (!directory.isOk())
    return directory.status().code() == StatusCode::kNotFound ? Status::ok() : directory.status();
  const std::filesystem::path file = *directory / std::filesystem::path(path).filename();
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0 || identityOf(st) != *placed) return Status::ok();
  drainer.forgetCopy(writer, path);
  if (::unlink(file.c_str()) != 0 && errno != ENOENT)
    return errnoStatus(errno, "cannot remove " + path + " from the tree");
  removeEmptyDirectories(tree, path);
  return Status::ok();
}

Status readTreeFile(const std::filesystem::path& tree, const PeerFile& file,
                    const std::function<Status(std::string_view bytes)>& each) {
  GRANARY_ASSIGN_OR_RETURN(const std::filesystem::path directory,
                           directoryOf(tree, file.path, false));
  const std::filesystem::path path = directory / std::filesystem::path(file.path).filename();
  OwnedFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return failedPrecondition(file.path + " is no longer in the tree");
  if (identityOf(st).size != file.size || identityOf(st).modifiedNanos != file.modifiedNanos)
    return failedPrecondition(file.path + " changed in the tree");
  ::posix_fadvise(fd.get(), 0, file.size, POSIX_FADV_SEQUENTIAL);  // a larger read-ahead
  std::string buffer(std::min<int64_t>(file.size, 1 << 20), '\0');
  for (int64_t at = 0; at < file.size;) {
    const ssize_t n = ::pread(fd.get(), buffer.data(),
                              static_cast<size_t>(std::min<int64_t>(file.size - at, 1 << 20)), at);
    if (n <= 0) return errnoStatus(n < 0 ? errno : EIO, "cannot read " + file.path);
    GRANARY_RETURN_IF_ERROR(each(std::string_view(buffer.data(), static_cast<size_t>(n))));
    at += n;
  }
  return Status::ok();
}

Status dropHeldCopies(const std::filesystem::path& tree, Drainer& drainer,
                      const std::string& writer) {
  for (const std::string& path : drainer.heldCopies(writer))
    GRANARY_RETURN_IF_ERROR(removeCopy(tree, drainer, writer, path));
  return Status::ok();
}

}  // namespace granary::checkpoint
