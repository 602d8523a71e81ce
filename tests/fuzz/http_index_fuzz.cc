// Fuzzes the listing parsers of the cache node's http(s):// origin
// (engine/origin/http_origin.h): the JSON index ({"files":[{"path","size","etag"}]}) and an
// autoindex page (the links the crawler follows). The same bytes go to both.
//
// Invariants beyond "no crash":
//   - index: every file has a size of at least 0 and a version; decode → encode → decode gives
//     the same files;
//   - autoindex: every link is a relative path the manifest accepts (no empty, "." or ".."
//     segment: the crawler never leaves the dataset's directory), and no link comes twice.
#include <cpprest/json.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "engine/origin/http_origin.h"
#include "engine/store/manifest_store.h"
#include "tests/fuzz/fuzz_check.h"

namespace granary::cache {
namespace {

std::string encode(const std::vector<OriginObject>& files) {
  web::json::value index = web::json::value::object();
  web::json::value list = web::json::value::array(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    list[i]["path"] = web::json::value::string(files[i].path);
    list[i]["size"] = web::json::value::number(files[i].size);
    list[i]["etag"] = web::json::value::string(files[i].etag);
  }
  index["files"] = list;
  return index.serialize();
}

std::string describe(const std::vector<OriginObject>& files) {
  std::string text;
  for (const auto& f : files) {
    text += "\n  \"" + f.path + "\" " + std::to_string(f.size) + " " + f.etag;
  }
  return text;
}

bool same(const std::vector<OriginObject>& a, const std::vector<OriginObject>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].path != b[i].path || a[i].size != b[i].size || a[i].etag != b[i].etag) return false;
  }
  return true;
}

void checkIndex(std::string_view text) {
  auto files = parseHttpIndex(text);
  if (!files.isOk()) return;
  for (const auto& f : *files) {
    GRANARY_FUZZ_CHECK(f.size >= 0 && !f.etag.empty(), "accepted:" + describe(*files));
  }
  const std::string again = encode(*files);
  auto reparsed = parseHttpIndex(again);
  GRANARY_FUZZ_CHECK(reparsed.isOk(), "the re-encoded index is refused: " +
                                          reparsed.status().toString() + "\n" + again);
  GRANARY_FUZZ_CHECK(same(*files, *reparsed), "decode → encode → decode differs:" +
                                                  describe(*files) + "\n" + describe(*reparsed));
}

void checkAutoindex(std::string_view page) {
  std::set<std::string> seen;
  for (const std::string& link : autoindexLinks(page)) {
    GRANARY_FUZZ_CHECK(seen.insert(link).second, "a link comes twice: \"" + link + "\"");
    std::string_view path = link;
    if (path.ends_with('/')) path.remove_suffix(1);
    const Status valid = validateManifestPath(path);
    GRANARY_FUZZ_CHECK(valid.isOk(), "a link the manifest refuses: " + valid.toString());
  }
}

}  // namespace
}  // namespace granary::cache

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary::cache;
  if (size > 256 * 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  checkIndex(text);
  checkAutoindex(text);
  return 0;
}
