// Fuzzes the watch-event decoder of the Kubernetes client (common/kube/watch_decoder.h): the
// bytes of a chunked watch response → events.
//
// Invariants beyond "no crash":
//   - chunking does not matter: the stream fed whole, split at one point, or a byte at a time
//     gives the same events, the same verdict and the same partial line;
//   - every decoded event, written back as a watch line, decodes to itself (as JSON values: the
//     number -0.0, written "-0", reads back as the integer 0).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/kube/watch_decoder.h"
#include "tests/fuzz/fuzz_check.h"

namespace granary::kube {
namespace {

// Small, so that the fuzzer reaches the line limit: some seed lines are longer, some shorter.
constexpr size_t kMaxLineBytes = 256;

struct Outcome {
  bool ok = true;
  std::vector<WatchEvent> events;
  bool partial = false;
};

// Feeds `stream` in pieces that end at `cuts` (ascending), stopping at the first error as the
// client drops the stream there.
Outcome decode(std::string_view stream, const std::vector<size_t>& cuts) {
  Outcome outcome;
  WatchDecoder decoder(kMaxLineBytes);
  size_t from = 0;
  for (size_t cut : cuts) {
    if (!decoder.feed(stream.substr(from, cut - from), outcome.events).isOk()) {
      outcome.ok = false;
      return outcome;
    }
    from = cut;
  }
  outcome.partial = decoder.hasPartialLine();
  return outcome;
}

std::string typeName(WatchEvent::Type type) {
  switch (type) {
    case WatchEvent::Type::kAdded:
      return "ADDED";
    case WatchEvent::Type::kModified:
      return "MODIFIED";
    case WatchEvent::Type::kDeleted:
      return "DELETED";
    case WatchEvent::Type::kBookmark:
      return "BOOKMARK";
    case WatchEvent::Type::kError:
      return "ERROR";
  }
  return "?";
}

std::string describe(const Outcome& o) {
  std::string text = o.ok ? "ok" : "error";
  text += o.partial ? ", partial line" : "";
  for (const auto& e : o.events) text += "\n  " + typeName(e.type) + " " + e.object.serialize();
  return text;
}

bool sameEvents(const std::vector<WatchEvent>& a, const std::vector<WatchEvent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].type != b[i].type || a[i].object.serialize() != b[i].object.serialize()) return false;
  }
  return true;
}

// `object` as it reads back once written: web::json writes the double -0.0 as "-0", which
// reads back as the integer 0, the same JSON number.
std::string written(const Json& object) { return Json::parse(object.serialize()).serialize(); }

bool same(const Outcome& a, const Outcome& b) {
  return a.ok == b.ok && a.partial == b.partial && sameEvents(a.events, b.events);
}

}  // namespace
}  // namespace granary::kube

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary::kube;
  if (size > 16 * 1024) return 0;  // a byte at a time below is quadratic in the line length
  const std::string_view stream(reinterpret_cast<const char*>(data), size);

  const Outcome whole = decode(stream, {size});
  // One cut, at a point the input chooses (its first byte), so that the fuzzer explores it.
  const size_t cut = size ? static_cast<size_t>(data[0]) * size / 256 : 0;
  const Outcome split = decode(stream, {cut, size});
  GRANARY_FUZZ_CHECK(same(whole, split), "whole: " + describe(whole) + "\nsplit at " +
                                             std::to_string(cut) + ": " + describe(split));
  std::vector<size_t> bytes;
  for (size_t i = 1; i <= size; ++i) bytes.push_back(i);
  const Outcome trickle = decode(stream, bytes);
  GRANARY_FUZZ_CHECK(same(whole, trickle),
                     "whole: " + describe(whole) + "\na byte at a time: " + describe(trickle));

  for (const WatchEvent& event : whole.events) {
    Json line = Json::object();
    line["type"] = Json::string(typeName(event.type));
    line["object"] = event.object;
    const std::string text = line.serialize() + "\n";
    Outcome again;
    WatchDecoder decoder;  // the default limit: a re-encoded line may grow (escapes)
    const bool ok = decoder.feed(text, again.events).isOk();
    GRANARY_FUZZ_CHECK(ok && again.events.size() == 1 && again.events[0].type == event.type &&
                           again.events[0].object.serialize() == written(event.object),
                       "re-encoded event does not decode to itself: " + text);
  }
  return 0;
}
