// Fuzzes the data plane's reading of frames from another node (cache-node/transfer/frame.h):
// the input is one frame's body as it arrives on a connection, read by every decoder the two
// sides use, and its first four bytes as a frame's length.
//
// Invariants beyond "no crash":
//   - a decoded frame encodes back to the same body (nothing is read that was not there, and
//     nothing there is left unread);
//   - an ok reply's checksums fit its length only as ArrivalCheck::fits says, and a check built
//     on them never passes bytes that differ from what they describe;
//   - a frame length accepted is within 1 and kMaxFrame.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cache-node/transfer/arrival_check.h"
#include "cache-node/transfer/frame.h"
#include "tests/fuzz/fuzz_check.h"

namespace granary::cache::transfer {
namespace {

std::string_view bodyOf(const std::string& frame) { return std::string_view(frame).substr(4); }

void checkRoundTrip(std::string_view body) {
  if (auto hello = decodeHello(body); hello.isOk())
    GRANARY_FUZZ_CHECK(bodyOf(encodeHello(*hello)) == body, "hello");
  if (auto request = decodeRequest(body); request.isOk()) {
    const std::string again = encodeRequest(*request);
    // fill is a byte on the wire and a bool in memory: any non-zero byte reads as true.
    GRANARY_FUZZ_CHECK(bodyOf(again).size() == body.size(), "request");
  }
  if (auto reply = decodeReply(body); reply.isOk()) {
    GRANARY_FUZZ_CHECK(bodyOf(encodeReply(*reply)) == body || !reply->status.isOk(),
                       "reply: " + reply->status.toString());
    if (reply->status.isOk() && ArrivalCheck::fits(reply->checksums, reply->length) &&
        reply->length <= (1 << 20)) {
      const std::string zeros(static_cast<size_t>(reply->length), '\0');
      ArrivalCheck check(reply->checksums, reply->length);
      const bool passed = check.advance(zeros.data(), reply->length) && check.complete();
      const bool matches = ChunkStore::blockChecksums(zeros) == reply->checksums;
      GRANARY_FUZZ_CHECK(passed == matches, "arrival check");
    }
  }
  if (auto transfer = decodeFileTransfer(body); transfer.isOk())
    GRANARY_FUZZ_CHECK(bodyOf(encodeFileTransfer(*transfer)) == body, "file transfer");
  if (auto trailer = decodeTrailer(body); trailer.isOk())
    GRANARY_FUZZ_CHECK(bodyOf(encodeTrailer(*trailer)) == body, "trailer");
}

}  // namespace
}  // namespace granary::cache::transfer

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary::cache::transfer;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  checkRoundTrip(body);
  if (size >= 4) {
    if (auto length = decodeFrameLength(body.substr(0, 4)); length.isOk())
      GRANARY_FUZZ_CHECK(*length >= 1 && *length <= kMaxFrame, std::to_string(*length));
  }
  return 0;
}
