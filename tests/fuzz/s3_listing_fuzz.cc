// Fuzzes the S3 ListObjectsV2 parser of the cache node's s3:// origin
// (engine/origin/s3_origin.h, pugixml underneath): a ListBucketResult page → objects.
//
// Invariants beyond "no crash":
//   - an accepted object has a key and a size of at least 0 (the listing refuses the rest);
//   - decode → encode → decode: an accepted page, written back as S3 writes a page (keys
//     URL-encoded, text escaped, times in ISO 8601), parses to the same page.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "common/url.h"
#include "engine/origin/s3_origin.h"
#include "tests/fuzz/fuzz_check.h"

namespace granary::cache {
namespace {

// Character data as XML can carry it: markup and control characters as references (pugixml
// would turn a raw CR into LF).
std::string escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "&#" + std::to_string(static_cast<unsigned char>(c)) + ";";
        } else {
          out += c;
        }
    }
  }
  return out;
}

// nanoseconds since the epoch → "YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ".
std::string iso8601(int64_t unixNanos) {
  using namespace std::chrono;
  const sys_time<nanoseconds> t{nanoseconds(unixNanos)};
  const auto day = floor<days>(t);
  const year_month_day date{day};
  const hh_mm_ss<nanoseconds> time{t - day};
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02u-%02uT%02lld:%02lld:%02lld.%09lldZ",
                static_cast<int>(date.year()), static_cast<unsigned>(date.month()),
                static_cast<unsigned>(date.day()), static_cast<long long>(time.hours().count()),
                static_cast<long long>(time.minutes().count()),
                static_cast<long long>(time.seconds().count()),
                static_cast<long long>(time.subseconds().count()));
  return text;
}

std::string encode(const S3ListPage& page) {
  std::string xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult>";
  xml += "<IsTruncated>" + std::string(page.truncated ? "true" : "false") + "</IsTruncated>";
  xml += "<NextContinuationToken>" + escape(page.nextContinuationToken) +
         "</NextContinuationToken><EncodingType>url</EncodingType>";
  for (const auto& o : page.objects) {
    xml += "<Contents><Key>" + percentEncode(o.key, "/") + "</Key><LastModified>" +
           iso8601(o.modifiedUnixNanos) + "</LastModified><ETag>" + escape(o.etag) +
           "</ETag><Size>" + std::to_string(o.size) + "</Size></Contents>";
  }
  return xml + "</ListBucketResult>";
}

std::string describe(const S3ListPage& page) {
  std::string text = std::string(page.truncated ? "truncated" : "complete") + ", next token \"" +
                     page.nextContinuationToken + "\"";
  for (const auto& o : page.objects) {
    text += "\n  \"" + o.key + "\" " + std::to_string(o.size) + " " + o.etag + " " +
            std::to_string(o.modifiedUnixNanos);
  }
  return text;
}

bool same(const S3ListPage& a, const S3ListPage& b) {
  if (a.truncated != b.truncated || a.nextContinuationToken != b.nextContinuationToken ||
      a.objects.size() != b.objects.size()) {
    return false;
  }
  for (size_t i = 0; i < a.objects.size(); ++i) {
    const auto &x = a.objects[i], &y = b.objects[i];
    if (x.key != y.key || x.size != y.size || x.etag != y.etag ||
        x.modifiedUnixNanos != y.modifiedUnixNanos) {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace granary::cache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary::cache;
  if (size > 256 * 1024) return 0;
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  auto page = parseListObjectsV2(xml);
  if (!page.isOk()) return 0;
  for (const auto& o : page->objects) {
    GRANARY_FUZZ_CHECK(!o.key.empty() && o.size >= 0, "accepted: " + describe(*page));
  }
  const std::string again = encode(*page);
  auto reparsed = parseListObjectsV2(again);
  GRANARY_FUZZ_CHECK(reparsed.isOk(), "the re-encoded page is refused: " +
                                          reparsed.status().toString() + "\n" + again);
  GRANARY_FUZZ_CHECK(same(*page, *reparsed), "decode → encode → decode differs:\n" +
                                                 describe(*page) + "\n" + describe(*reparsed));
  return 0;
}
