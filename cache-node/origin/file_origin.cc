// file:// origins: a directory the node can read.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "cache-node/origin/origin.h"

namespace granary::cache {
namespace {

constexpr size_t kBatch = 4096;

std::string etagOf(const struct stat& st) {
  return std::to_string(st.st_size) + "-" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
}

class FileOrigin final : public Origin {
 public:
  explicit FileOrigin(std::filesystem::path root) : root_(std::move(root)) {}

  Status list(const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    std::vector<OriginObject> batch;
    std::error_code error;
    // Directory symlinks are not followed (no cycles); file symlinks are read through.
    for (auto it = std::filesystem::recursive_directory_iterator(root_, error);
         !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
      struct stat st {};
      if (::stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      OriginObject object;
      object.path = std::filesystem::relative(it->path(), root_).generic_string();
      object.size = st.st_size;
      object.etag = etagOf(st);
      object.modifiedUnixNanos =
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
      object.mode = st.st_mode & 0777;
      batch.push_back(std::move(object));
      if (batch.size() == kBatch) {
        GRANARY_RETURN_IF_ERROR(each(std::move(batch)));
        batch.clear();
      }
    }
    if (error) return unavailable("cannot list " + root_.string() + ": " + error.message());
    if (!batch.empty()) GRANARY_RETURN_IF_ERROR(each(std::move(batch)));
    return Status::ok();
  }

  Result<std::string> read(const std::string& path, int64_t offset, int64_t length,
                           const std::string& etag) override {
    const std::filesystem::path file = root_ / path;
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return notFound(file.string() + " is gone from the origin");
      return unavailable("cannot open " + file.string() + ": " + std::strerror(errno));
    }
    struct stat before {};
    ::fstat(fd, &before);
    if (!etag.empty() && etagOf(before) != etag) {
      ::close(fd);
      return failedPrecondition(path + " changed at the origin since it was listed");
    }
    std::string data(
        static_cast<size_t>(std::max<int64_t>(0, std::min(length, before.st_size - offset))), '\0');
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n =
          ::pread(fd, data.data() + done, data.size() - done, offset + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        return n == 0 ? failedPrecondition(path + " shrank at the origin while being read")
                      : unavailable("cannot read " + file.string() + ": " + std::strerror(errno));
      }
      done += static_cast<size_t>(n);
    }
    struct stat after {};
    ::fstat(fd, &after);
    ::close(fd);
    if (!etag.empty() && etagOf(after) != etag) {
      return failedPrecondition(path + " changed at the origin while being read");
    }
    return data;
  }

 private:
  std::filesystem::path root_;
};

}  // namespace

Result<std::unique_ptr<Origin>> makeFileOrigin(const std::string& root) {
  std::error_code error;
  if (!std::filesystem::is_directory(root, error)) {
    return invalidArgument("file:// source " + root + " is not a directory on this node");
  }
  return std::unique_ptr<Origin>(new FileOrigin(root));
}

}  // namespace granary::cache
