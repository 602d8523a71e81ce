#include "engine/checkpoint/s3_writer.h"

#include <unistd.h>

#include <cerrno>

#include "common/errno_status.h"
#include "engine/origin/beneath.h"

namespace granary::checkpoint {
namespace {

constexpr int64_t kMaxParts = 10'000;

class S3Writer final : public OriginWriter {
 public:
  explicit S3Writer(std::unique_ptr<cache::S3ObjectWriter> store) : store_(std::move(store)) {}

  Status upload(const std::string& path, int fd, int64_t size, const Pace& pace) override {
    if (!cache::isPlainRelativePath(path))
      return invalidArgument("\"" + path + "\" is not a path inside the checkpoint tree");
    if (size <= kMultipartAbove) {
      GRANARY_ASSIGN_OR_RETURN(const std::string body, readPiece(fd, 0, size, pace, path));
      if (!pace(0)) return cancelled("upload of " + path + " stopped");
      return store_->put(path, body);
    }
    const int64_t partSize = std::max(kMultipartAbove, (size + kMaxParts - 1) / kMaxParts);
    GRANARY_ASSIGN_OR_RETURN(const std::string id, store_->startMultipart(path));
    std::vector<std::string> etags;
    Status s;
    for (int64_t at = 0; at < size && s.isOk(); at += partSize) {
      auto body = readPiece(fd, at, std::min(partSize, size - at), pace, path);
      if (!body.isOk()) {
        s = body.status();
        break;
      }
      auto etag = store_->putPart(path, id, static_cast<int>(etags.size()) + 1, *body);
      if (etag.isOk())
        etags.push_back(std::move(*etag));
      else
        s = etag.status();
    }
    if (s.isOk() && !pace(0)) s = cancelled("upload of " + path + " stopped");
    if (s.isOk()) s = store_->completeMultipart(path, id, etags);
    if (!s.isOk()) (void)store_->abortMultipart(path, id);
    return s;
  }

  Status remove(const std::string& path) override {
    if (!cache::isPlainRelativePath(path))
      return invalidArgument("\"" + path + "\" is not a path inside the checkpoint tree");
    return store_->remove(path);
  }

 private:
  // `length` bytes at `offset`, paced a MiB at a time.
  static Result<std::string> readPiece(int fd, int64_t offset, int64_t length, const Pace& pace,
                                       const std::string& path) {
    std::string body(static_cast<size_t>(length), '\0');
    for (int64_t done = 0; done < length;) {
      const int64_t want = std::min<int64_t>(1 << 20, length - done);
      if (!pace(want)) return cancelled("upload of " + path + " stopped");
      const ssize_t n = ::pread(fd, body.data() + done, static_cast<size_t>(want), offset + done);
      if (n < 0) return errnoStatus(errno, "cannot read the local copy of " + path);
      if (n == 0)
        return failedPrecondition("the local copy of " + path + " shrank while uploading");
      done += n;
    }
    return body;
  }

  std::unique_ptr<cache::S3ObjectWriter> store_;
};

}  // namespace

std::unique_ptr<OriginWriter> makeS3Writer(std::unique_ptr<cache::S3ObjectWriter> store) {
  return std::make_unique<S3Writer>(std::move(store));
}

Result<std::unique_ptr<OriginWriter>> makeS3Writer(const cache::SourceSpec& source) {
  GRANARY_ASSIGN_OR_RETURN(cache::S3OriginOptions options, cache::s3OptionsOf(source));
  GRANARY_ASSIGN_OR_RETURN(auto store, cache::makeS3ObjectWriter(std::move(options)));
  return makeS3Writer(std::move(store));
}

}  // namespace granary::checkpoint
