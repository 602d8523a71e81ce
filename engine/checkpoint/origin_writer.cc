#include "engine/checkpoint/origin_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/errno_status.h"
#include "common/owned_fd.h"
#include "engine/checkpoint/s3_writer.h"
#include "engine/origin/beneath.h"

namespace granary::checkpoint {
namespace {

constexpr int64_t kPiece = 1 << 20;  // bytes read, paced and written at a time

Status errnoStatus(const std::string& what) { return granary::errnoStatus(errno, what); }

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t slash; (slash = path.find('/', start)) != std::string::npos; start = slash + 1)
    parts.push_back(path.substr(start, slash - start));
  parts.push_back(path.substr(start));
  return parts;
}

// The directory `parts` names below `dirFd`, created where missing; symlinks are not followed.
Result<OwnedFd> openDirectories(int dirFd, const std::vector<std::string>& parts,
                                const std::string& what) {
  OwnedFd current(::dup(dirFd));
  for (const std::string& part : parts) {
    if (::mkdirat(current.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
      return errnoStatus("cannot create a directory of " + what);
    OwnedFd next(::openat(current.get(), part.c_str(), O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return errnoStatus("cannot open a directory of " + what);
    current = std::move(next);
  }
  return current;
}

// A directory on the node: each upload is written whole to kStagingDirectory, synced, and
// renamed into place, so a reader of the directory never sees part of a file.
class FileOriginWriter final : public OriginWriter {
 public:
  FileOriginWriter(OwnedFd root, std::string uri) : root_(std::move(root)), uri_(std::move(uri)) {}

  Status upload(const std::string& path, int fd, int64_t size, const Pace& pace) override {
    GRANARY_RETURN_IF_ERROR(checkPath(path));
    const std::string what = uri_ + path;
    GRANARY_ASSIGN_OR_RETURN(OwnedFd staging,
                             openDirectories(root_.get(), {std::string(kStagingDirectory)}, what));
    const std::string staged = stagedPrefix() + std::to_string(++uploads_);
    OwnedFd out(::openat(staging.get(), staged.c_str(),
                         O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!out) return errnoStatus("cannot stage " + what);
    Status copied = copy(fd, out.get(), size, pace, what);
    if (copied.isOk() && ::fsync(out.get()) != 0) copied = errnoStatus("cannot sync " + what);
    if (copied.isOk() && !pace(0)) copied = cancelled("upload of " + what + " stopped");
    if (copied.isOk()) copied = place(staging.get(), staged, path, what);
    if (!copied.isOk()) ::unlinkat(staging.get(), staged.c_str(), 0);
    return copied;
  }

  // Removes what uploads of this host's processes that ended (killed mid-upload) left staged.
  // Several nodes may share the directory: each one's staged names start with its host name.
  void removeLeftovers() {
    OwnedFd staging(::openat(root_.get(), std::string(kStagingDirectory).c_str(),
                             O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!staging) return;
    const std::string host = hostName() + ".";
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(
             "/proc/self/fd/" + std::to_string(staging.get()), error)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with(host)) continue;
      const pid_t pid = static_cast<pid_t>(std::atoll(name.c_str() + host.size()));
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH)
        ::unlinkat(staging.get(), name.c_str(), 0);
    }
  }

  Status remove(const std::string& path) override {
    GRANARY_RETURN_IF_ERROR(checkPath(path));
    std::vector<std::string> parts = components(path);
    const std::string name = parts.back();
    parts.pop_back();
    std::vector<OwnedFd> chain;  // the directories from the root down to the file's
    chain.emplace_back(::dup(root_.get()));
    for (const std::string& part : parts) {
      OwnedFd next(
          ::openat(chain.back().get(), part.c_str(), O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!next)
        return errno == ENOENT ? Status::ok() : errnoStatus("cannot remove " + uri_ + path);
      chain.push_back(std::move(next));
    }
    if (::unlinkat(chain.back().get(), name.c_str(), 0) != 0 && errno != ENOENT)
      return errnoStatus("cannot remove " + uri_ + path);
    // Directories left empty go too, deepest first; one that is not empty ends it.
    for (size_t i = parts.size(); i-- > 0;)
      if (::unlinkat(chain[i].get(), parts[i].c_str(), AT_REMOVEDIR) != 0) break;
    return Status::ok();
  }

 private:
  static Status checkPath(const std::string& path) {
    if (!cache::isPlainRelativePath(path) || path.starts_with(std::string(kStagingDirectory) + "/"))
      return invalidArgument("\"" + path + "\" is not a path inside the checkpoint tree");
    return Status::ok();
  }

  static Status copy(int in, int out, int64_t size, const Pace& pace, const std::string& what) {
    std::vector<char> buffer(static_cast<size_t>(std::min(size, kPiece)));
    for (int64_t at = 0; at < size;) {
      const int64_t want = std::min(kPiece, size - at);
      if (!pace(want)) return cancelled("upload of " + what + " stopped");
      const ssize_t n = ::pread(in, buffer.data(), static_cast<size_t>(want), at);
      if (n < 0) return errnoStatus("cannot read the local copy of " + what);
      if (n == 0)
        return failedPrecondition("the local copy of " + what + " shrank while uploading");
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(out, buffer.data() + done, static_cast<size_t>(n - done));
        if (w < 0) return errnoStatus("cannot write " + what);
        done += w;
      }
      at += n;
    }
    return Status::ok();
  }

  Status place(int staging, const std::string& staged, const std::string& path,
               const std::string& what) {
    std::vector<std::string> parts = components(path);
    const std::string name = parts.back();
    parts.pop_back();
    GRANARY_ASSIGN_OR_RETURN(OwnedFd directory, openDirectories(root_.get(), parts, what));
    if (::renameat(staging, staged.c_str(), directory.get(), name.c_str()) != 0)
      return errnoStatus("cannot place " + what);
    if (::fsync(directory.get()) != 0) return errnoStatus("cannot sync the directory of " + what);
    return Status::ok();
  }

  static std::string hostName() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
  }
  static std::string stagedPrefix() { return hostName() + "." + std::to_string(::getpid()) + "."; }

  OwnedFd root_;
  std::string uri_;  // ends in '/'
  std::atomic<uint64_t> uploads_{0};
};

Result<std::unique_ptr<OriginWriter>> makeFileWriter(const cache::SourceSpec& source,
                                                     const cache::OriginSettings& settings) {
  const std::string path = source.uri.substr(7);
  if (!path.starts_with("/"))
    return invalidArgument("uri: file:// needs an absolute path, e.g. file:///mnt/checkpoints/");
  GRANARY_ASSIGN_OR_RETURN(const cache::LocatedSource located,
                           cache::locateFileSource(source, settings));
  // From the directory that exists down: a namespace's directory of a root of namespaces is made
  // here when missing, and no element (a symlink swapped in since the check) is followed.
  OwnedFd root(::open(located.above.c_str(), O_DIRECTORY | O_CLOEXEC));
  if (!root) return errnoStatus("uri: cannot open " + located.above.string());
  std::vector<std::string> parts;
  for (const auto& below : {located.fromAbove, located.relative})
    if (!below.empty())
      for (std::string& part : components(below.generic_string())) parts.push_back(std::move(part));
  GRANARY_ASSIGN_OR_RETURN(OwnedFd tree, openDirectories(root.get(), parts, source.uri));
  std::string uri = source.uri;
  if (!uri.ends_with("/")) uri += "/";
  auto writer = std::make_unique<FileOriginWriter>(std::move(tree), std::move(uri));
  writer->removeLeftovers();
  return std::unique_ptr<OriginWriter>(std::move(writer));
}

}  // namespace

Result<std::unique_ptr<OriginWriter>> makeOriginWriter(const cache::SourceSpec& source,
                                                       const cache::OriginSettings& settings) {
  if (source.uri.starts_with("file://")) return makeFileWriter(source, settings);
  if (source.uri.starts_with("s3://")) return makeS3Writer(source);
  return invalidArgument("uri: checkpoints go to s3:// or file:// uris, not \"" +
                         source.uri.substr(0, source.uri.find(':')) + "\"");
}

}  // namespace granary::checkpoint
