// The passthrough negotiation, from the bytes the kernel sends and libfuse writes: an INIT that
// offers passthrough is answered with it taken (and the stack depth set), any other message
// goes through untouched.
#include "engine/mount/passthrough.h"

#include <gtest/gtest.h>
#include <linux/fuse.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace granary::cache::passthrough {
namespace {

constexpr uint64_t kPassthrough = uint64_t{1} << 37;
constexpr uint32_t kInitExtended = 1u << 30;

std::vector<char> initRequest(uint64_t unique, uint64_t flags) {
  std::vector<char> message(sizeof(fuse_in_header) + 64, '\0');
  fuse_in_header header{};
  header.len = static_cast<uint32_t>(message.size());
  header.opcode = FUSE_INIT;
  header.unique = unique;
  std::memcpy(message.data(), &header, sizeof header);
  fuse_init_in init{};
  init.major = 7;
  init.minor = 40;
  init.flags = static_cast<uint32_t>(flags) | kInitExtended;
  init.flags2 = static_cast<uint32_t>(flags >> 32);
  std::memcpy(message.data() + sizeof header, &init, sizeof init);
  return message;
}

// What the negotiation writes for libfuse's reply to request `unique` (header, then a 64-byte
// fuse_init_out with `flags`), as read back from a pipe.
std::string replyWritten(Negotiation& negotiation, uint64_t unique, uint32_t flags) {
  fuse_out_header header{};
  header.len = sizeof header + 64;
  header.unique = unique;
  char body[64] = {};
  std::memcpy(body + offsetof(fuse_init_out, flags), &flags, 4);
  iovec iov[2] = {{&header, sizeof header}, {body, sizeof body}};
  int pipe[2];
  EXPECT_EQ(::pipe(pipe), 0);
  EXPECT_EQ(negotiation.writeReply(pipe[1], iov, 2), static_cast<ssize_t>(header.len));
  std::string written(header.len, '\0');
  EXPECT_EQ(::read(pipe[0], written.data(), written.size()), static_cast<ssize_t>(header.len));
  ::close(pipe[0]);
  ::close(pipe[1]);
  return written;
}

uint32_t at(const std::string& reply, size_t offset) {
  uint32_t value;
  std::memcpy(&value, reply.data() + sizeof(fuse_out_header) + offset, 4);
  return value;
}

TEST(PassthroughNegotiation, TakesTheKernelsOfferInTheInitReply) {
  Negotiation negotiation(true);
  const auto request = initRequest(9, kPassthrough);
  negotiation.sawRequest(request.data(), request.size());
  EXPECT_TRUE(negotiation.offered());
  EXPECT_FALSE(negotiation.agreed()) << "not before the reply is written";
  const std::string reply = replyWritten(negotiation, 9, kInitExtended);
  EXPECT_TRUE(negotiation.agreed());
  const size_t flags2 = offsetof(fuse_init_out, flags2);
  EXPECT_NE(at(reply, flags2) & (kPassthrough >> 32), 0u);
  EXPECT_EQ(at(reply, flags2 + 4), 2u) << "max_stack_depth";
  EXPECT_EQ(at(reply, offsetof(fuse_init_out, flags)), kInitExtended)
      << "the rest as libfuse wrote";
}

TEST(PassthroughNegotiation, LeavesEverythingElseAsItIs) {
  const auto offer = initRequest(9, kPassthrough);
  const auto noOffer = initRequest(9, 0);
  Negotiation unwanted(false);  // the mount does not want it
  unwanted.sawRequest(offer.data(), offer.size());
  Negotiation notOffered(true);  // the kernel does not offer it
  notOffered.sawRequest(noOffer.data(), noOffer.size());
  for (Negotiation* n : {&unwanted, &notOffered}) {
    const std::string reply = replyWritten(*n, 9, kInitExtended);
    EXPECT_FALSE(n->agreed());
    EXPECT_EQ(at(reply, offsetof(fuse_init_out, flags2)), 0u);
  }
  Negotiation wanted(true);
  wanted.sawRequest(offer.data(), offer.size());
  EXPECT_EQ(at(replyWritten(wanted, 10, kInitExtended), offsetof(fuse_init_out, flags2)), 0u)
      << "another request's reply";
  EXPECT_EQ(at(replyWritten(wanted, 9, kInitExtended | FUSE_WRITEBACK_CACHE),
               offsetof(fuse_init_out, flags2)),
            0u)
      << "the kernel refuses passthrough with a writeback cache";
  EXPECT_FALSE(wanted.agreed());
}

}  // namespace
}  // namespace granary::cache::passthrough
