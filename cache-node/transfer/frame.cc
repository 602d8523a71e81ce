#include "cache-node/transfer/frame.h"

#include <bit>
#include <cstring>

namespace granary::cache::transfer {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the data plane writes integers as they lie in memory: little-endian hosts only");

enum Kind : uint8_t {
  kHello = 1,
  kRequest = 2,
  kReply = 3,
  kFileRead = 4,
  kFilePut = 5,
  kTrailer = 6
};

// Appends fields to a frame whose length is filled in by finish().
class FrameWriter {
 public:
  explicit FrameWriter(Kind kind) : out_(4, '\0') { put(static_cast<uint8_t>(kind)); }
  template <typename T>
  FrameWriter& put(T value) {
    out_.append(reinterpret_cast<const char*>(&value), sizeof value);
    return *this;
  }
  FrameWriter& putString(std::string_view text) {
    put(static_cast<uint32_t>(text.size()));
    out_.append(text);
    return *this;
  }
  std::string finish() {
    const auto length = static_cast<uint32_t>(out_.size() - 4);
    std::memcpy(out_.data(), &length, 4);
    return std::move(out_);
  }

 private:
  std::string out_;
};

// Reads fields of a frame's body in order; any read past its end leaves it failed.
class FrameReader {
 public:
  FrameReader(std::string_view body, Kind kind, const char* what) : body_(body), what_(what) {
    uint8_t found = 0;
    if (!get(found) || found != kind) ok_ = false;
  }
  template <typename T>
  bool get(T& value) {
    if (!ok_ || body_.size() < sizeof value) return ok_ = false;
    std::memcpy(&value, body_.data(), sizeof value);
    body_.remove_prefix(sizeof value);
    return true;
  }
  bool getString(std::string& text) {
    uint32_t length = 0;
    if (!get(length) || body_.size() < length) return ok_ = false;
    text.assign(body_.substr(0, length));
    body_.remove_prefix(length);
    return true;
  }
  // OK when every read succeeded and nothing is left over.
  Status finish() const {
    if (ok_ && body_.empty()) return Status::ok();
    return invalidArgument(std::string("a malformed ") + what_ + " frame");
  }

 private:
  std::string_view body_;
  const char* what_;
  bool ok_ = true;
};

}  // namespace

std::string encodeHello(const Hello& hello) {
  return FrameWriter(kHello)
      .put(hello.version)
      .putString(hello.token)
      .putString(hello.node)
      .finish();
}

std::string encodeRequest(const ChunkRequest& r) {
  return FrameWriter(kRequest)
      .putString(r.ns)
      .putString(r.name)
      .putString(r.uid)
      .put(r.generation)
      .putString(r.path)
      .put(r.index)
      .putString(r.etag)
      .put(static_cast<uint8_t>(r.fill ? 1 : 0))
      .put(r.length)
      .finish();
}

std::string encodeReply(const Reply& reply) {
  FrameWriter out(kReply);
  out.put(static_cast<uint8_t>(reply.status.code())).putString(reply.status.message());
  if (reply.status.isOk()) {
    out.put(reply.length).put(static_cast<uint32_t>(reply.checksums.size()));
    for (const uint32_t checksum : reply.checksums) out.put(checksum);
  }
  return out.finish();
}

std::string encodeFileTransfer(const FileTransfer& transfer) {
  FrameWriter out(transfer.put ? kFilePut : kFileRead);
  out.putString(transfer.message).put(transfer.length);
  return out.finish();
}

std::string encodeTrailer(uint64_t xxh3) { return FrameWriter(kTrailer).put(xxh3).finish(); }

bool isFileTransfer(std::string_view body) {
  return !body.empty() && (body.front() == kFileRead || body.front() == kFilePut);
}

Result<FileTransfer> decodeFileTransfer(std::string_view body) {
  FileTransfer transfer{.put = !body.empty() && body.front() == kFilePut};
  FrameReader in(body, transfer.put ? kFilePut : kFileRead, "file transfer");
  in.getString(transfer.message);
  in.get(transfer.length);
  GRANARY_RETURN_IF_ERROR(in.finish());
  if (transfer.length < 0) return invalidArgument("a file transfer of a negative length");
  return transfer;
}

Result<uint64_t> decodeTrailer(std::string_view body) {
  FrameReader in(body, kTrailer, "trailer");
  uint64_t xxh3 = 0;
  in.get(xxh3);
  GRANARY_RETURN_IF_ERROR(in.finish());
  return xxh3;
}

Result<Hello> decodeHello(std::string_view body) {
  FrameReader in(body, kHello, "hello");
  Hello hello;
  in.get(hello.version);
  in.getString(hello.token);
  in.getString(hello.node);
  GRANARY_RETURN_IF_ERROR(in.finish());
  return hello;
}

Result<ChunkRequest> decodeRequest(std::string_view body) {
  FrameReader in(body, kRequest, "request");
  ChunkRequest r;
  uint8_t fill = 0;
  in.getString(r.ns);
  in.getString(r.name);
  in.getString(r.uid);
  in.get(r.generation);
  in.getString(r.path);
  in.get(r.index);
  in.getString(r.etag);
  in.get(fill);
  in.get(r.length);
  GRANARY_RETURN_IF_ERROR(in.finish());
  r.fill = fill != 0;
  return r;
}

Result<Reply> decodeReply(std::string_view body) {
  FrameReader in(body, kReply, "reply");
  uint8_t code = 0;
  std::string message;
  in.get(code);
  in.getString(message);
  Reply reply;
  if (code > static_cast<uint8_t>(StatusCode::kInternal))
    return invalidArgument("a reply with an unknown status code " + std::to_string(code));
  reply.status = Status(static_cast<StatusCode>(code), std::move(message));
  if (reply.status.isOk()) {
    uint32_t count = 0;
    in.get(reply.length);
    in.get(count);
    for (uint32_t i = 0; i < count && in.get(reply.checksums.emplace_back()); ++i) {
    }
  }
  GRANARY_RETURN_IF_ERROR(in.finish());
  if (reply.length < 0) return invalidArgument("a reply with a negative length");
  return reply;
}

Result<uint32_t> decodeFrameLength(std::string_view header) {
  uint32_t length = 0;
  if (header.size() != 4) return invalidArgument("a frame header is 4 bytes");
  std::memcpy(&length, header.data(), 4);
  if (length == 0 || length > kMaxFrame)
    return invalidArgument("a frame of " + std::to_string(length) + " bytes (at most " +
                           std::to_string(kMaxFrame) + ")");
  return length;
}

}  // namespace granary::cache::transfer
