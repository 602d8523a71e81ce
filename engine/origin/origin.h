// Where a dataset's bytes come from. One small interface for every kind of origin (file://,
// http(s)://, s3://); the warmer and the read path never know which one they talk to.
//
// Errors: NotFound (the path is gone), FailedPrecondition (the file changed at the origin since
// it was listed: its etag no longer matches), Unavailable (transient: retry with backoff),
// PermissionDenied / Unauthenticated (credentials), InvalidArgument (a bad source).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/core/key_range.h"

namespace granary::cache {

// A file's version where its origin gives no ETag or Last-Modified: only its size,
// "size:<bytes>". Such a version cannot tell two contents of one size apart, so a file pinned by
// it is read whole, in one request, never assembled from chunks of separate requests.
std::string sizeVersion(int64_t size);
bool isSizeVersion(std::string_view version);

struct OriginObject {
  std::string path;  // relative to the source root, '/'-separated
  int64_t size = 0;
  std::string etag;  // the origin's version of the file (a sizeVersion where it gives no other)
  int64_t modifiedUnixNanos = 0;
  uint32_t mode = 0444;
};

class Origin {
 public:
  virtual ~Origin() = default;

  // Lists every file of the source, handing them over in batches (a million files never sit in
  // one vector). Stops at the first error `each` returns.
  virtual Status list(const std::function<Status(std::vector<OriginObject>&&)>& each) = 0;

  // Whether list() hands paths over in key order (S3 does), so that listRange() can list a part
  // of it: a listing cut short goes on where it ended, and parts are listed side by side.
  virtual bool listsInKeyOrder() const { return false; }
  // Ranges that cover the source's key order between them, at most `parts`, about as large each
  // (splitAtDirectories of its top-level directories); the whole key order as one range where
  // the source cannot say or !listsInKeyOrder().
  virtual Result<std::vector<KeyRange>> split(size_t parts);
  // list() of the paths in `range`, in key order. FailedPrecondition where !listsInKeyOrder().
  virtual Status listRange(const KeyRange& range,
                           const std::function<Status(std::vector<OriginObject>&&)>& each);

  // Reads `length` bytes at `offset` of `path`, as of version `etag` (FailedPrecondition when
  // the file changed). Callers stay within the listed size (web servers differ on ranges past
  // the end); the file origin returns fewer bytes there.
  virtual Result<std::string> read(const std::string& path, int64_t offset, int64_t length,
                                   const std::string& etag) = 0;

  // Requests retried after transient failures so far (0 for origins that never retry).
  virtual int64_t retries() const { return 0; }

  // Called on the thread of a read or listing before an attempt that failed is sent again, with
  // the bytes the new attempt asks for (a read's length; for a listing page, what the failed
  // attempt received). It may block: a bandwidth limit waits here, so that every attempt is paid
  // for before it is sent, not only a read's first.
  using RetryGate = std::function<void(int64_t bytes)>;
  // Set once, before the first read or listing. Origins that never retry ignore it; a wrapper
  // forwards it.
  virtual void setRetryGate(RetryGate) {}
};

// A directory on the node (NFS, hostPath): `relative` below `root` (engine/origin/beneath.h
// locates it), reading nothing outside `root`. Every list and read resolves beneath `root` again,
// so a component swapped for a symlink after this check leads nowhere outside: such a read fails
// with PermissionDenied. Symlinks to files are read through while they stay beneath `root`;
// others are left out of the listing; symlinks to directories are not followed (no cycles).
// InvalidArgument when the directory is not one.
Result<std::unique_ptr<Origin>> makeFileOrigin(const std::filesystem::path& root,
                                               const std::filesystem::path& relative);

// The directory `root` as its own root (tools and tests that name the directory themselves).
Result<std::unique_ptr<Origin>> makeFileOrigin(const std::string& root);

}  // namespace granary::cache
