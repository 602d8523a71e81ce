#include "engine/origin/http_origin.h"

#include <cpprest/json.h>

#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

#include "common/url.h"
#include "engine/core/manifest_path.h"
#include "engine/origin/curl_transfer.h"

namespace granary::cache {
namespace {

// How deep an autoindex crawl nests directories, at most (datasets nest a few levels).
constexpr int kMaxCrawlDepth = 32;

std::string encodePath(const std::string& path) { return percentEncode(path, "/"); }

// A JSON number as a size: a whole number from 0 to 2^53 (a double that is whole counts: some
// generators write 1500.0); nullopt otherwise.
std::optional<int64_t> wholeBytes(const web::json::number& n) {
  if (n.is_int64()) {
    return n.to_int64() >= 0 ? std::optional<int64_t>(n.to_int64()) : std::nullopt;
  }
  if (n.is_integral()) return std::nullopt;  // an unsigned value past int64_t
  const double d = n.to_double();
  if (!(d >= 0 && d <= 9007199254740992.0) || d != std::floor(d)) return std::nullopt;
  return static_cast<int64_t>(d);
}

// The values of the page's href="..." attributes (the name in any case), as the pattern
// href="([^"]+)" finds them. Not std::regex: libstdc++'s recurses once per character matched,
// and a 50 KB link overflowed the stack.
std::vector<std::string_view> hrefValues(std::string_view page) {
  constexpr std::string_view kName = "href=\"";
  const auto startsHere = [&](size_t at) {
    for (size_t i = 0; i < kName.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(page[at + i])) != kName[i]) return false;
    }
    return true;
  };
  std::vector<std::string_view> values;
  for (size_t at = 0; at + kName.size() <= page.size(); ++at) {
    if (!startsHere(at)) continue;
    const size_t begin = at + kName.size();
    const size_t end = page.find('"', begin);
    if (end == std::string_view::npos) break;  // no value is closed after this point
    if (end == begin) continue;                // href="": none here
    values.push_back(page.substr(begin, end - begin));
    at = end;  // the next search starts after the closing quote
  }
  return values;
}

// The file's whole size as a response gives it: the total of its Content-Range, else (a whole
// body or a HEAD) its length; -1 when it says neither.
int64_t wholeSizeOf(const HttpResponse& r) {
  if (const auto slash = r.contentRange.rfind('/'); slash != std::string::npos) {
    const std::string total = r.contentRange.substr(slash + 1);
    return total == "*" ? -1 : std::atoll(total.c_str());
  }
  if (r.status != 200) return -1;
  return r.contentLength >= 0 ? r.contentLength : static_cast<int64_t>(r.body.size());
}

// The version of the file a response is of: its ETag, else its Last-Modified, else its size.
std::string versionOf(const HttpResponse& r) {
  if (!r.etag.empty()) return r.etag;
  if (!r.lastModified.empty()) return r.lastModified;
  const int64_t size = wholeSizeOf(r);
  return size < 0 ? std::string() : sizeVersion(size);
}

// Whether `r` is of the version `listed`. A size version (from an index that gave none) is checked
// against the file's size, whatever ETag the server sends; any other against versionOf(r).
bool isVersion(const HttpResponse& r, const std::string& listed) {
  if (isSizeVersion(listed)) return sizeVersion(wholeSizeOf(r)) == listed;
  return versionOf(r) == listed;
}

class HttpOrigin final : public Origin {
 public:
  explicit HttpOrigin(HttpOriginOptions options)
      : options_(std::move(options)),
        transfer_({.timeout = options_.timeout,
                   .maxAttempts = options_.maxAttempts,
                   .retryDelay = options_.retryDelay}) {}

  Status list(const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    if (!options_.index.empty()) return listIndex(each);
    return crawl("", 0, each);
  }

  int64_t retries() const override { return transfer_.retries(); }
  void setRetryGate(RetryGate gate) override { transfer_.setRetryGate(std::move(gate)); }

  Result<std::string> read(const std::string& path, int64_t offset, int64_t length,
                           const std::string& etag) override {
    if (length <= 0) return std::string();
    GRANARY_ASSIGN_OR_RETURN(HttpResponse r,
                             send(encodePath(path), "GET", ByteRange{offset, length}, true));
    if (r.status == 404) return notFound(path + " is gone from the origin");
    if (r.status == 416) {  // the file ends before `offset`
      if (etag.empty()) return std::string();
      return failedPrecondition(path + " is shorter at the origin than when it was listed");
    }
    if (!etag.empty() && !isVersion(r, etag)) {
      return failedPrecondition(path + " changed at the origin since it was listed");
    }
    if (r.status == 200) {  // the server ignored Range: take the part we asked for
      if (offset >= static_cast<int64_t>(r.body.size())) return std::string();
      return r.body.substr(static_cast<size_t>(offset), static_cast<size_t>(length));
    }
    if (r.status != 206) return statusFor(r, path);
    return std::move(r.body);
  }

 private:
  // One request with retries. `checkLength` makes a short body a (retryable) failure.
  Result<HttpResponse> send(const std::string& relative, const char* method,
                            std::optional<ByteRange> range, bool checkLength = false) {
    HttpRequest request{.url = options_.baseUrl + relative,
                        .head = std::string(method) == "HEAD",
                        .range = range,
                        .followRedirects = true,
                        .checkBodyLength = checkLength};
    if (!options_.bearerToken.empty()) {
      request.headers.push_back("Authorization: Bearer " + options_.bearerToken.reveal());
    }
    return transfer_.send(request);
  }

  static Status statusFor(const HttpResponse& r, const std::string& what) {
    if (r.status == 401)
      return {StatusCode::kUnauthenticated, what + ": the origin wants credentials"};
    if (r.status == 403)
      return {StatusCode::kPermissionDenied, what + ": the origin refused access"};
    if (r.status == 404) return notFound(what + " is not at the origin");
    return unavailable(what + ": HTTP " + std::to_string(r.status));
  }

  Status listIndex(const std::function<Status(std::vector<OriginObject>&&)>& each) {
    GRANARY_ASSIGN_OR_RETURN(HttpResponse r, send(encodePath(options_.index), "GET", std::nullopt));
    if (r.status != 200) return statusFor(r, "index " + options_.index);
    auto batch = parseHttpIndex(r.body);
    if (!batch.isOk()) return batch.status().withContext("index " + options_.index);
    return batch->empty() ? Status::ok() : each(std::move(*batch));
  }

  // Walks an autoindex page: links ending in '/' are sub-directories, others files (sized by HEAD).
  // Directories nest kMaxCrawlDepth deep at most: a listing that loops (a directory that links
  // to itself, a symlink to its parent) is an error, not an endless walk.
  Status crawl(const std::string& directory, int depth,
               const std::function<Status(std::vector<OriginObject>&&)>& each) {
    if (depth > kMaxCrawlDepth) {
      return failedPrecondition("listing of /" + directory.substr(0, 200) +
                                "...: directories nest " + "deeper than " +
                                std::to_string(kMaxCrawlDepth) +
                                " (the listing may loop); list the files in an index "
                                "(options.index) instead");
    }
    GRANARY_ASSIGN_OR_RETURN(HttpResponse page, send(encodePath(directory), "GET", std::nullopt));
    if (page.status != 200) return statusFor(page, "listing of /" + directory);
    std::vector<OriginObject> batch;
    for (const std::string& link : autoindexLinks(page.body)) {
      if (link.back() == '/') {
        GRANARY_RETURN_IF_ERROR(crawl(directory + link, depth + 1, each));
        continue;
      }
      const std::string path = directory + link;
      GRANARY_ASSIGN_OR_RETURN(HttpResponse head, send(encodePath(path), "HEAD", std::nullopt));
      if (head.status != 200) return statusFor(head, path);
      OriginObject o;
      o.path = path;
      o.size = std::max<int64_t>(0, head.contentLength);
      o.etag = versionOf(head);
      batch.push_back(std::move(o));
    }
    return batch.empty() ? Status::ok() : each(std::move(batch));
  }

  HttpOriginOptions options_;
  CurlTransfer transfer_;
};

}  // namespace

Result<std::vector<OriginObject>> parseHttpIndex(std::string_view json) {
  web::json::value index;
  try {
    index = web::json::value::parse(std::string(json));
  } catch (const std::exception& e) {
    return invalidArgument(std::string("not JSON: ") + e.what());
  }
  if (!index.has_array_field("files")) {
    return invalidArgument("expected {\"files\": [{\"path\", \"size\", \"etag\"}]}");
  }
  std::vector<OriginObject> files;
  for (const auto& f : index.at("files").as_array()) {
    if (!f.has_string_field("path") || !f.has_number_field("size")) {
      return invalidArgument("every file needs path and size");
    }
    OriginObject o;
    o.path = f.at("path").as_string();
    const auto size = wholeBytes(f.at("size").as_number());
    if (!size) return invalidArgument(o.path + ": size must be a whole number of bytes");
    o.size = *size;
    if (f.has_string_field("etag")) o.etag = f.at("etag").as_string();
    if (o.etag.empty()) o.etag = sizeVersion(o.size);
    files.push_back(std::move(o));
  }
  return files;
}

std::vector<std::string> autoindexLinks(std::string_view page) {
  std::vector<std::string> links;
  std::set<std::string> seen;
  for (const std::string_view href : hrefValues(page)) {
    std::string link(href);
    // Only plain relative children: no parents, sort links, absolute or external URLs.
    if (link.empty() || link[0] == '?' || link[0] == '/' || link[0] == '#' ||
        link.rfind("..", 0) == 0 || link.find("://") != std::string::npos ||
        link.find('?') != std::string::npos) {
      continue;
    }
    link = percentDecode(link);
    if (link.rfind("./", 0) == 0) link = link.substr(2);
    // Checked once decoded ("%2e%2e/" is "../"): a path the manifest takes, below this directory.
    std::string_view path = link;
    if (path.ends_with('/')) path.remove_suffix(1);
    if (!validateManifestPath(path).isOk()) continue;
    if (!seen.insert(link).second) continue;
    links.push_back(std::move(link));
  }
  return links;
}

Result<std::unique_ptr<Origin>> makeHttpOrigin(HttpOriginOptions options) {
  const std::string& url = options.baseUrl;
  if ((url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) || url.back() != '/') {
    return invalidArgument("http source \"" + url +
                           "\": expected http(s)://host/path/ ending in '/'");
  }
  return std::unique_ptr<Origin>(new HttpOrigin(std::move(options)));
}

}  // namespace granary::cache
