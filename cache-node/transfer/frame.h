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

// Each reads a frame's body (after its length). InvalidArgument for another kind, a field cut
// short or bytes left over.
Result<Hello> decodeHello(std::string_view body);
Result<ChunkRequest> decodeRequest(std::string_view body);
Result<Reply> decodeReply(std::string_view body);

// The length a frame's first four bytes announce. InvalidArgument past kMaxFrame.
Result<uint32_t> decodeFrameLength(std::string_view header);

}  // namespace granary::cache::transfer
