#include "common/kube/watch_decoder.h"

#include <gtest/gtest.h>

namespace granary::kube {
namespace {

const std::string kAdded =
    R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})";
const std::string kBookmark =
    R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})";

TEST(WatchDecoder, DecodesEventsSplitAnywhere) {
  const std::string stream = kAdded + "\n" + kBookmark + "\n";
  for (size_t split = 0; split <= stream.size(); ++split) {
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    ASSERT_TRUE(decoder.feed(std::string_view(stream).substr(0, split), events).isOk());
    ASSERT_TRUE(decoder.feed(std::string_view(stream).substr(split), events).isOk());
    ASSERT_EQ(events.size(), 2u) << split;
    EXPECT_EQ(events[0].type, WatchEvent::Type::kAdded);
    EXPECT_EQ(nameOf(events[0].object), "a");
    EXPECT_EQ(events[1].type, WatchEvent::Type::kBookmark);
    EXPECT_EQ(resourceVersionOf(events[1].object), "9");
    EXPECT_FALSE(decoder.hasPartialLine());
  }
}

TEST(WatchDecoder, ByteAtATime) {
  const std::string stream = kAdded + "\n\n" + kAdded + "\r\n";
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  for (char c : stream) ASSERT_TRUE(decoder.feed(std::string_view(&c, 1), events).isOk());
  EXPECT_EQ(events.size(), 2u);
}

TEST(WatchDecoder, TruncatedLastLineIsReportedNotDecoded) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  ASSERT_TRUE(decoder.feed(kAdded + "\n" + kAdded.substr(0, 20), events).isOk());
  EXPECT_EQ(events.size(), 1u);
  EXPECT_TRUE(decoder.hasPartialLine());
}

TEST(WatchDecoder, ErrorEventsCarryTheStatus) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  ASSERT_TRUE(decoder
                  .feed(R"({"type":"ERROR","object":{"kind":"Status","code":410}})"
                        "\n",
                        events)
                  .isOk());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, WatchEvent::Type::kError);
  EXPECT_EQ(events[0].object.at("code").as_integer(), 410);
}

TEST(WatchDecoder, GarbageIsAnErrorNotACrash) {
  for (const char* bad : {"not json\n", "{\"type\":\"ADDED\"}\n",
                          "{\"type\":\"EXPLODED\",\"object\":{}}\n", "[1,2]\n"}) {
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    EXPECT_EQ(decoder.feed(bad, events).code(), StatusCode::kInternal) << bad;
  }
  WatchDecoder small(16);
  std::vector<WatchEvent> events;
  EXPECT_EQ(small.feed(std::string(40, 'x'), events).code(), StatusCode::kInternal);
}

// A number no double holds would decode as infinity, which no JSON writer can write back.
TEST(WatchDecoder, ANumberBeyondADoubleIsAnError) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  const Status status =
      decoder.feed(R"({"type":"MODIFIED","object":{"status":{"totalBytes":1e999}}})"
                   "\n",
                   events);
  EXPECT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("beyond a double's range"), std::string::npos)
      << status.message();
  EXPECT_TRUE(events.empty());
}

TEST(WatchDecoder, TheLineLimitHoldsHoweverTheLineArrives) {
  // Found by tests/fuzz/watch_decoder_fuzz: a line over the limit was refused when it came in
  // pieces, and decoded when it came whole with its newline in one chunk.
  const std::string line = kAdded + "\n";
  WatchDecoder whole(kAdded.size() - 1);
  std::vector<WatchEvent> events;
  EXPECT_EQ(whole.feed(line, events).code(), StatusCode::kInternal);
  WatchDecoder pieces(kAdded.size() - 1);
  EXPECT_TRUE(pieces.feed(line.substr(0, 10), events).isOk());
  EXPECT_EQ(pieces.feed(line.substr(10), events).code(), StatusCode::kInternal);
  EXPECT_TRUE(events.empty());
  WatchDecoder exact(kAdded.size());
  ASSERT_TRUE(exact.feed(line, events).isOk());
  EXPECT_EQ(events.size(), 1u);
}

}  // namespace
}  // namespace granary::kube
