// The peer data plane's wire format: what one cache node and another say over a plain TCP
// connection to move chunk bytes, without I/O (the sockets are transfer_server.h's and
// transfer_client.h's). Every integer is little-endian; a string is its u32 length and its bytes.
//
//   connection  = hello reply (request reply bytes)*
//   frame       = u32 length, then `length` bytes (at most kMaxFrame): u8 kind, then its fields
//   hello       = kind 1: u32 version, string token, string node (who connects)
//   request     = kind 2: string namespace, name, uid; i64 generation; string path; i64 index;
//                 string etag; u8 fill; i64 length (the bytes the caller expects)
//   reply       = kind 3: u8 code (StatusCode), string message; when ok and answering a request,
//                 i64 length and u32 count, then `count` u32 checksums, one per
//                 ChunkStore::kChecksumBlock bytes
//   bytes       = `length` raw bytes after an ok reply to a request (outside any frame, so that
//                 the sender hands them to the kernel straight from the chunk's file)
//   file read   = kind 4: string request (a v1::ReadCheckpointFileRequest, serialized), i64 length
//                 (the size asked): answered by a reply (ok: the length), the file's raw bytes,
//                 then a trailer
//   file put    = kind 5: string header (a v1::CheckpointFilePiece without data, serialized),
//                 i64 length, then the raw bytes and a trailer; answered by a reply once placed
//   trailer     = kind 6: u64 XXH3-64 of the file's bytes (a checkpoint file has no checksums
//                 recorded: it is hashed as it is sent and as it arrives)
//
// A hello with a token other than the cluster's is answered Unauthenticated and the connection
// closed. A connection carries one request at a time, in order; the plane opens several to each
// peer for parallelism.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace granary::cache::transfer {

inline constexpr uint32_t kVersion = 1;
// The largest frame either side accepts: a reply's checksums for a chunk of 1 GiB are 64 KiB.
inline constexpr uint32_t kMaxFrame = 256 << 10;

struct Hello {
  uint32_t version = kVersion;
  std::string token;
  std::string node;
};

struct ChunkRequest {
  std::string ns, name, uid;
  int64_t generation = 0;
  std::string path;
  int64_t index = 0;
  std::string etag;
  bool fill = false;
  int64_t length = 0;
};

// A checkpoint file's transfer (file read, file put).
struct FileTransfer {
  bool put = false;     // kind 5; else 4
  std::string message;  // the serialized request or header
  int64_t length = 0;   // the file's bytes: sent (put) or asked (read)
};

struct Reply {
  Status status = Status::ok();
  // On an ok reply to a request: the bytes that follow, and their checksums.
  int64_t length = 0;
  std::vector<uint32_t> checksums;
};

// Each returns a whole frame, its length first.
std::string encodeHello(const Hello& hello);
std::string encodeRequest(const ChunkRequest& request);
std::string encodeReply(const Reply& reply);
std::string encodeFileTransfer(const FileTransfer& transfer);
std::string encodeTrailer(uint64_t xxh3);

// Whether a frame's body is a file transfer (kind 4 or 5) rather than a chunk request.
bool isFileTransfer(std::string_view body);

// Each reads a frame's body (after its length). InvalidArgument for another kind, a field cut
// short or bytes left over.
Result<Hello> decodeHello(std::string_view body);
Result<ChunkRequest> decodeRequest(std::string_view body);
Result<Reply> decodeReply(std::string_view body);
Result<FileTransfer> decodeFileTransfer(std::string_view body);
Result<uint64_t> decodeTrailer(std::string_view body);

// The length a frame's first four bytes announce. InvalidArgument past kMaxFrame.
Result<uint32_t> decodeFrameLength(std::string_view header);

}  // namespace granary::cache::transfer
