// The origin's writing side, for a job's checkpoints: uploads a closed file of the tree whole and
// removes paths. Reads (the restore) go through the read-only origin (engine/origin/origin.h),
// which lists and reads the same uri.
//
// Errors as the origins' (origin.h): Unavailable (transient: retried by the drain with backoff),
// PermissionDenied / Unauthenticated, InvalidArgument (a bad uri or path), Cancelled (the pace
// stopped an upload).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "engine/origin/make_origin.h"

namespace granary::checkpoint {

// Staged uploads of a file:// origin wait in this directory below its root until renamed into
// place; the restore leaves it out.
inline constexpr std::string_view kStagingDirectory = ".granary-staging";

class OriginWriter {
 public:
  // Called before each piece of an upload is read and sent, with its size, and with 0 once every
  // piece is read, just before the upload is made visible; it may block (a bandwidth limit waits
  // here). False stops the upload: nothing of it stays at the origin.
  using Pace = std::function<bool(int64_t bytes)>;

  virtual ~OriginWriter() = default;

  // Uploads the `size` bytes of `fd` (read with pread from offset 0) as `path`, '/'-separated
  // below the uri. Whole or not at all: readers of the origin see the old content (or nothing)
  // until the new content is complete. Cancelled when `pace` stopped it.
  virtual Status upload(const std::string& path, int fd, int64_t size, const Pace& pace) = 0;

  // Removes `path`; OK when the origin does not hold it. A file:// origin also removes the
  // directories this leaves empty (up to the uri's own).
  virtual Status remove(const std::string& path) = 0;
};

// A writer for `source` (file:// within settings.fileOriginRoots, creating the uri's directory
// when missing; s3:// with its credentials). InvalidArgument naming the uri and the fix when it
// cannot be written to.
Result<std::unique_ptr<OriginWriter>> makeOriginWriter(const cache::SourceSpec& source,
                                                       const cache::OriginSettings& settings);

}  // namespace granary::checkpoint
