#include "cache-node/transfer/file_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "cache-node/transfer/socket_io.h"
#include "common/errno_status.h"

namespace granary::cache::transfer {
namespace {

constexpr int64_t kWriteBehind = 8 << 20;

}  // namespace

Status sendFileBytes(int socket, int fd, int64_t size, std::chrono::milliseconds stall,
                     const std::function<bool(int64_t)>& pace, Xxh3Stream& hash) {
  ::posix_fadvise(fd, 0, size, POSIX_FADV_SEQUENTIAL);  // a larger read-ahead
  std::string buffer;
  for (int64_t offset = 0; offset < size;) {
    const int64_t piece = std::min(kFilePiece, size - offset);
    if (!pace(piece)) return cancelled("the copy stopped");
    buffer.resize(static_cast<size_t>(piece));
    if (::pread(fd, buffer.data(), buffer.size(), offset) != piece)
      return failedPrecondition("the file became shorter while it was sent");
    hash.add(buffer);
    GRANARY_RETURN_IF_ERROR(sendAll(socket, buffer, stall, /*more=*/true));
    offset += piece;
  }
  return Status::ok();
}

Status receiveFileBytes(int socket, int fd, int64_t size, std::chrono::milliseconds stall,
                        Xxh3Stream& hash, const std::function<void(int64_t)>& arrived) {
  std::string buffer(static_cast<size_t>(std::min(kFilePiece, size)), '\0');
  int64_t writing = 0;  // the bytes before this are on their way to the disk
  for (int64_t at = 0; at < size;) {
    const int64_t piece = std::min(kFilePiece, size - at);
    GRANARY_RETURN_IF_ERROR(receiveExactly(socket, buffer.data(), piece, stall));
    hash.add(std::string_view(buffer.data(), static_cast<size_t>(piece)));
    if (::pwrite(fd, buffer.data(), static_cast<size_t>(piece), at) != piece)
      return errnoStatus(errno, "cannot write what arrived");
    at += piece;
    if (at - writing >= kWriteBehind || at == size) {
      // Written back while the rest arrives, so that the fsync after the last byte finds little
      // left to write. Best effort: the fsync is what makes it durable.
      ::sync_file_range(fd, writing, at - writing, SYNC_FILE_RANGE_WRITE);
      writing = at;
    }
    if (arrived) arrived(piece);
  }
  return Status::ok();
}

}  // namespace granary::cache::transfer
