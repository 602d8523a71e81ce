#include "engine/origin/s3_origin.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <limits>
#include <map>
#include <pugixml.hpp>
#include <sstream>

#include "common/url.h"
#include "engine/origin/curl_transfer.h"

namespace granary::cache {
namespace {

// SHA-256 of an empty body: the payload hash of every request this origin sends (GETs). S3
// wants it in x-amz-content-sha256 on signed requests; libcurl 7.88 does not add it itself.
constexpr std::string_view kEmptyBodySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

void appendUtf8(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

template <typename T>
bool parseNumber(std::string_view text, T& out, int base = 10) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return error == std::errc() && end == text.data() + text.size();
}

// The text of `parent`'s child element `name` ("" when absent): its character data with
// references replaced, and its CDATA sections as they are. pugixml leaves unknown references
// as they are, which XML forbids, so character data is unescaped here (xmlUnescape) and a bad
// reference refuses the listing.
Result<std::string> childText(const pugi::xml_node& parent, const char* name) {
  std::string text;
  for (const pugi::xml_node& part : parent.child(name).children()) {
    if (part.type() == pugi::node_cdata) {
      text += part.value();
    } else if (part.type() == pugi::node_pcdata) {
      auto unescaped = xmlUnescape(part.value());
      if (!unescaped) return unavailable("bad character reference in <" + std::string(name) + ">");
      text += *unescaped;
    }
  }
  return text;
}

bool isValidBucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (const char c : bucket) {
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == '-')) {
      return false;
    }
  }
  const auto alnum = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) ||
           std::isdigit(static_cast<unsigned char>(c));
  };
  return alnum(bucket.front()) && alnum(bucket.back()) && bucket.find("..") == std::string::npos;
}

Status checkBucket(std::string_view bucket, std::string_view where) {
  if (bucket.empty()) return invalidArgument(std::string(where) + ": the bucket name is missing");
  if (!isValidBucket(bucket)) {
    return invalidArgument(std::string(where) + ": bucket \"" + std::string(bucket) +
                           "\" is not a valid bucket name (3-63 characters: lower-case letters, "
                           "digits, '.' and '-', starting and ending with a letter or digit)");
  }
  return Status::ok();
}

Status checkPrefix(std::string_view prefix, std::string_view where) {
  if (prefix.empty()) return Status::ok();
  if (prefix.front() == '/') {
    return invalidArgument(std::string(where) + ": prefix \"" + std::string(prefix) +
                           "\" must not start with '/' (S3 keys have no leading slash)");
  }
  if (prefix.back() != '/') {
    return invalidArgument(std::string(where) + ": prefix \"" + std::string(prefix) +
                           "\" must end in '/' (a directory): \"" + std::string(prefix) + "/\"");
  }
  return Status::ok();
}

// Pages of the delimited listing read for split(): 100,000 top-level directories.
constexpr int kSplitPages = 100;

class S3Origin final : public Origin, public S3ObjectWriter {
 public:
  S3Origin(S3OriginOptions options, std::string baseUrl, std::string listUrl)
      : options_(std::move(options)),
        baseUrl_(std::move(baseUrl)),
        listUrl_(std::move(listUrl)),
        signed_(!options_.accessKeyId.empty()),
        transfer_({.timeout = options_.timeout,
                   .maxAttempts = options_.maxAttempts,
                   .retryDelay = options_.retryDelay}) {}

  Status list(const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    return listRange({}, each);
  }
  bool listsInKeyOrder() const override { return true; }

  // The top-level directories come from a listing with delimiter '/', at most kSplitPages pages
  // of it: a part past them is larger than the others, never missing.
  Result<std::vector<KeyRange>> split(size_t parts) override {
    if (parts < 2) return std::vector<KeyRange>{KeyRange{}};
    const std::string what = "listing of the top-level directories of " + source();
    std::vector<std::string> directories;
    std::string token;
    for (int pages = 0; pages < kSplitPages; ++pages) {
      GRANARY_ASSIGN_OR_RETURN(const S3ListPage page,
                               fetchPage({.token = token, .delimited = true}, what));
      for (const std::string& prefix : page.commonPrefixes) {
        if (prefix.size() > options_.prefix.size() && prefix.back() == '/') {
          directories.push_back(prefix.substr(options_.prefix.size()));
        }
      }
      if (!page.truncated) break;
      token = page.nextContinuationToken;
    }
    std::sort(directories.begin(), directories.end());
    return splitAtDirectories(directories, parts);
  }

  Status listRange(const KeyRange& range,
                   const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    const std::string what = "listing of " + source();
    std::string token;
    do {
      GRANARY_ASSIGN_OR_RETURN(S3ListPage page,
                               fetchPage({.token = token, .after = range.after}, what));
      std::vector<OriginObject> batch;
      batch.reserve(page.objects.size());
      bool past = false;  // the page went beyond the range: its end is listed
      for (auto& object : page.objects) {
        // "Directory markers" (zero-byte keys ending in '/', made by consoles and some tools)
        // are not files.
        if (object.key.back() == '/') continue;
        OriginObject o;
        o.path = object.key.substr(options_.prefix.size());
        if (!range.through.empty() && o.path > range.through) {
          past = true;
          break;
        }
        o.size = object.size;
        o.etag = std::move(object.etag);
        o.modifiedUnixNanos = object.modifiedUnixNanos;
        batch.push_back(std::move(o));
      }
      if (!batch.empty()) GRANARY_RETURN_IF_ERROR(each(std::move(batch)));
      if (past) break;
      token = page.truncated ? page.nextContinuationToken : "";
    } while (!token.empty());
    return Status::ok();
  }

  int64_t retries() const override { return transfer_.retries(); }
  void setRetryGate(RetryGate gate) override { transfer_.setRetryGate(std::move(gate)); }

  Result<std::string> read(const std::string& path, int64_t offset, int64_t length,
                           const std::string& etag) override {
    if (length <= 0) return std::string();
    const std::string what = source() + path;
    HttpRequest request = baseRequest(objectUrl(options_.prefix + path));
    request.range = ByteRange{offset, length};
    request.checkBodyLength = true;
    // S3 answers 412 when the object changed; the ETag check below catches stores that ignore
    // If-Match.
    if (!etag.empty()) request.headers.push_back("If-Match: " + etag);
    GRANARY_ASSIGN_OR_RETURN(HttpResponse r, transfer_.send(request));
    if (r.status == 416) return std::string();  // at or past the end (or an empty object)
    if (r.status != 200 && r.status != 206) return statusFor(r, what);
    if (!etag.empty() && !r.etag.empty() && r.etag != etag) {
      return failedPrecondition(what + " changed at the origin since it was listed");
    }
    if (r.status == 200) {  // the store ignored Range: take the part we asked for
      if (offset >= static_cast<int64_t>(r.body.size())) return std::string();
      return r.body.substr(static_cast<size_t>(offset), static_cast<size_t>(length));
    }
    // Some S3-compatible stores answer a range with more than was asked (s3rver reads
    // "bytes=0-0" as "bytes=0-"): keep what was asked, provided the part starts where asked.
    if (r.contentRange.rfind("bytes " + std::to_string(offset) + "-", 0) != 0) {
      return unavailable(what + ": asked for bytes " + request.range->text() + ", got \"" +
                         r.contentRange + "\"");
    }
    if (static_cast<int64_t>(r.body.size()) > length) r.body.resize(static_cast<size_t>(length));
    return std::move(r.body);
  }

  Status put(const std::string& path, const std::string& body) override {
    GRANARY_ASSIGN_OR_RETURN(const HttpResponse r, send("PUT", path, "", body));
    return r.status == 200 ? Status::ok() : statusFor(r, source() + path);
  }

  Result<std::string> startMultipart(const std::string& path) override {
    GRANARY_ASSIGN_OR_RETURN(const HttpResponse r, send("POST", path, "uploads=", ""));
    if (r.status != 200) return statusFor(r, source() + path);
    pugi::xml_document document;
    document.load_buffer(r.body.data(), r.body.size());
    const std::string id = document.child("InitiateMultipartUploadResult").child_value("UploadId");
    if (id.empty()) return unavailable(source() + path + ": no UploadId in the store's answer");
    return id;
  }

  Result<std::string> putPart(const std::string& path, const std::string& uploadId, int part,
                              const std::string& body) override {
    GRANARY_ASSIGN_OR_RETURN(
        const HttpResponse r,
        send("PUT", path,
             "partNumber=" + std::to_string(part) + "&uploadId=" + percentEncode(uploadId), body));
    if (r.status != 200) return statusFor(r, source() + path);
    if (r.etag.empty()) return unavailable(source() + path + ": a part without an ETag");
    return r.etag;
  }

  Status completeMultipart(const std::string& path, const std::string& uploadId,
                           const std::vector<std::string>& etags) override {
    pugi::xml_document document;
    pugi::xml_node parts = document.append_child("CompleteMultipartUpload");
    for (size_t i = 0; i < etags.size(); ++i) {
      pugi::xml_node part = parts.append_child("Part");
      part.append_child("PartNumber").text().set(static_cast<unsigned long long>(i + 1));
      part.append_child("ETag").text().set(etags[i].c_str());
    }
    std::ostringstream xml;
    document.save(xml, "", pugi::format_raw | pugi::format_no_declaration);
    GRANARY_ASSIGN_OR_RETURN(const HttpResponse r,
                             send("POST", path, "uploadId=" + percentEncode(uploadId), xml.str()));
    // S3 may answer 200 with an <Error> document when the completion failed late.
    if (r.status != 200 || !errorCode(r).empty()) return statusFor(r, source() + path);
    return Status::ok();
  }

  Status abortMultipart(const std::string& path, const std::string& uploadId) override {
    GRANARY_ASSIGN_OR_RETURN(const HttpResponse r,
                             send("DELETE", path, "uploadId=" + percentEncode(uploadId), ""));
    if (r.status == 204 || r.status == 200 || r.status == 404) return Status::ok();
    return statusFor(r, source() + path);
  }

  Status remove(const std::string& path) override {
    GRANARY_ASSIGN_OR_RETURN(const HttpResponse r, send("DELETE", path, "", ""));
    if (r.status == 204 || r.status == 200 || r.status == 404) return Status::ok();
    return statusFor(r, source() + path);
  }

 private:
  std::string source() const { return "s3://" + options_.bucket + "/" + options_.prefix; }

  // A request with a body to the object `path`; `query` as SigV4's canonical query string
  // (parameters sorted, encoded).
  Result<HttpResponse> send(const std::string& method, const std::string& path,
                            const std::string& query, const std::string& body) {
    std::string url = objectUrl(options_.prefix + path);
    if (!query.empty()) url += "?" + query;
    HttpRequest request = baseRequest(std::move(url));
    request.method = method;
    request.body = body;
    for (std::string& header : request.headers)
      if (header.starts_with("x-amz-content-sha256:"))
        header = "x-amz-content-sha256: UNSIGNED-PAYLOAD";
    request.headers.push_back("Content-Type: application/octet-stream");
    request.headers.push_back("Expect:");  // no 100-continue round trip
    return transfer_.send(request);
  }

  std::string objectUrl(const std::string& key) const {
    return baseUrl_ + "/" + percentEncode(key, "/");
  }

  HttpRequest baseRequest(std::string url) const {
    HttpRequest request{.url = std::move(url), .pathAsIs = true};
    if (signed_) {
      request.awsSigV4 = "aws:amz:" + options_.region + ":s3";
      request.username = options_.accessKeyId;
      request.password = options_.secretAccessKey;
      request.headers.push_back("x-amz-content-sha256: " + std::string(kEmptyBodySha256));
      if (!options_.sessionToken.empty()) {
        request.headers.push_back("x-amz-security-token: " + options_.sessionToken.reveal());
      }
    }
    return request;
  }

  struct PageQuery {
    std::string token;       // the page it continues to; "" for the first
    std::string after;       // a path below the prefix the listing starts after; "" for none
    bool delimited = false;  // keys below the top-level directories rolled up into them
  };
  // A page of the listing.
  HttpRequest listRequest(const PageQuery& page) const {
    // Sorted by name and encoded as SigV4's canonical query string: libcurl 7.88 signs the query
    // exactly as written, so any other order or encoding would sign a different request than S3
    // checks. std::map keeps the order.
    std::map<std::string, std::string> query{{"list-type", "2"},
                                             {"max-keys", std::to_string(options_.listPageSize)},
                                             {"encoding-type", "url"}};
    if (!options_.prefix.empty()) query["prefix"] = options_.prefix;
    if (!page.token.empty()) query["continuation-token"] = page.token;
    if (!page.after.empty() && page.token.empty()) {
      query["start-after"] = options_.prefix + page.after;
    }
    if (page.delimited) query["delimiter"] = "/";
    std::string url = listUrl_;
    char separator = '?';
    for (const auto& [name, value] : query) {
      url += separator + percentEncode(name) + "=" + percentEncode(value);
      separator = '&';
    }
    return baseRequest(std::move(url));
  }

  // Fetches and parses a page of the listing: every key (and directory) within the prefix, a
  // truncated page with a new continuation token. Errors name `what`.
  Result<S3ListPage> fetchPage(const PageQuery& query, const std::string& what) {
    GRANARY_ASSIGN_OR_RETURN(HttpResponse r, transfer_.send(listRequest(query)));
    if (r.status != 200) return statusFor(r, what);
    auto page = parseListObjectsV2(r.body);
    if (!page.isOk()) return page.status().withContext(what);
    const auto outside = [&](const std::string& key) { return key.rfind(options_.prefix, 0) != 0; };
    for (const auto& object : page->objects) {
      if (outside(object.key)) {
        return unavailable(what + ": the store returned key \"" + object.key +
                           "\", outside the prefix");
      }
    }
    for (const auto& prefix : page->commonPrefixes) {
      if (outside(prefix)) {
        return unavailable(what + ": the store returned directory \"" + prefix +
                           "\", outside the prefix");
      }
    }
    if (page->truncated &&
        (page->nextContinuationToken.empty() || page->nextContinuationToken == query.token)) {
      return unavailable(what + ": a truncated page without a new continuation token");
    }
    return page;
  }

  // The <Code> of an S3 error document, e.g. "NoSuchKey"; "" when there is none. Never more of
  // the body: some errors echo the request (the access key id, the string to sign).
  static std::string errorCode(const HttpResponse& r) {
    pugi::xml_document document;
    if (!document.load_buffer(r.body.data(), r.body.size())) return "";
    const std::string code = document.child("Error").child_value("Code");
    if (code.empty() || code.size() > 64) return "";
    for (const char c : code) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.') return "";  // not S3's
    }
    return code;
  }

  Status statusFor(const HttpResponse& r, const std::string& what) const {
    const std::string code = errorCode(r);
    const std::string because = code.empty() ? "" : " (" + code + ")";
    const std::string bucket = "bucket \"" + options_.bucket + "\"";
    switch (r.status) {
      case 301:  // PermanentRedirect; a 307 (a new bucket's DNS settling) falls to Unavailable
        return invalidArgument(what + ": " + bucket + " is not served by this endpoint in region " +
                               options_.region + "; set the bucket's region or endpoint" + because);
      case 400:
        if (code == "AuthorizationHeaderMalformed") {
          return invalidArgument(what + ": " + bucket + " is not in region " + options_.region +
                                 "; set the bucket's region" + because);
        }
        return invalidArgument(what + ": the store refused the request" + because);
      case 401:
        return {StatusCode::kUnauthenticated,
                what + ": the store wants valid credentials" + because};
      case 403:
        return {StatusCode::kPermissionDenied,
                what + ": access to " + bucket + " denied" + because};
      case 404:
        if (code == "NoSuchBucket") return notFound(what + ": " + bucket + " does not exist");
        return notFound(what + " is not at the origin" + because);
      case 412:
        return failedPrecondition(what + " changed at the origin since it was listed");
      default:
        return unavailable(what + ": HTTP " + std::to_string(r.status) + because);
    }
  }

  S3OriginOptions options_;
  std::string baseUrl_;  // scheme://host[:port][/bucket], no trailing '/'
  // The bucket's own URL: scheme://host[:port]/bucket or scheme://bucket.host[:port]/.
  std::string listUrl_;
  bool signed_;
  CurlTransfer transfer_;
};

}  // namespace

std::optional<std::string> xmlUnescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t amp = text.find('&', i);
    if (amp == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, amp - i));
    const size_t semicolon = text.find(';', amp);
    if (semicolon == std::string_view::npos) return std::nullopt;
    const std::string_view name = text.substr(amp + 1, semicolon - amp - 1);
    if (name == "amp") {
      out += '&';
    } else if (name == "lt") {
      out += '<';
    } else if (name == "gt") {
      out += '>';
    } else if (name == "quot") {
      out += '"';
    } else if (name == "apos") {
      out += '\'';
    } else if (name.size() > 1 && name[0] == '#') {
      uint32_t c = 0;
      const bool hex = name[1] == 'x';
      if (!parseNumber(name.substr(hex ? 2 : 1), c, hex ? 16 : 10)) return std::nullopt;
      // XML's Char production: no NUL, no surrogates, nothing past U+10FFFF.
      if (c == 0 || (c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) return std::nullopt;
      appendUtf8(out, c);
    } else {
      return std::nullopt;
    }
    i = semicolon + 1;
  }
  return out;
}

std::optional<int64_t> parseIso8601UnixNanos(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fraction]Z
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text.back() != 'Z') {
    return std::nullopt;
  }
  int year = 0;
  unsigned month = 0;
  unsigned day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  if (!parseNumber(text.substr(0, 4), year) || !parseNumber(text.substr(5, 2), month) ||
      !parseNumber(text.substr(8, 2), day) || !parseNumber(text.substr(11, 2), hour) ||
      !parseNumber(text.substr(14, 2), minute) || !parseNumber(text.substr(17, 2), second)) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year(year), std::chrono::month(month),
                                         std::chrono::day(day)};
  if (!date.ok() || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  int64_t nanos = 0;
  const std::string_view rest = text.substr(19, text.size() - 20);  // between seconds and 'Z'
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2 || rest.size() > 10) return std::nullopt;
    const std::string_view digits = rest.substr(1);
    if (!parseNumber(digits, nanos)) return std::nullopt;
    for (size_t n = digits.size(); n < 9; ++n) nanos *= 10;
  }
  const auto days = std::chrono::sys_days(date).time_since_epoch().count();
  const int64_t seconds = static_cast<int64_t>(days) * 86400 + hour * 3600 + minute * 60 + second;
  // Nanoseconds since the epoch fit in an int64_t from 1677 to 2262 only.
  constexpr int64_t kMaxSeconds = std::numeric_limits<int64_t>::max() / 1'000'000'000 - 1;
  if (seconds > kMaxSeconds || seconds < -kMaxSeconds) return std::nullopt;
  return seconds * 1'000'000'000 + nanos;
}

Result<S3ListPage> parseListObjectsV2(std::string_view xml) {
  pugi::xml_document document;
  // Structure only: references in character data are replaced by childText.
  const unsigned options = (pugi::parse_default | pugi::parse_ws_pcdata) & ~pugi::parse_escapes;
  const pugi::xml_parse_result parsed = document.load_buffer(xml.data(), xml.size(), options);
  const pugi::xml_node result = document.child("ListBucketResult");
  if (!parsed || !result) {
    return unavailable(std::string("the response is not a ListBucketResult") +
                       (parsed ? "" : std::string(": ") + parsed.description()));
  }
  S3ListPage page;
  GRANARY_ASSIGN_OR_RETURN(const std::string truncated, childText(result, "IsTruncated"));
  page.truncated = truncated == "true";
  GRANARY_ASSIGN_OR_RETURN(page.nextContinuationToken, childText(result, "NextContinuationToken"));
  GRANARY_ASSIGN_OR_RETURN(const std::string encoding, childText(result, "EncodingType"));
  const bool urlEncoded = encoding == "url";

  for (const pugi::xml_node& contents : result.children("Contents")) {
    S3ListPage::Object object;
    GRANARY_ASSIGN_OR_RETURN(object.key, childText(contents, "Key"));
    if (object.key.empty()) return unavailable("a <Contents> without a <Key>");
    // encoding-type=url: S3 form-encodes keys (a space is '+'), so that keys with characters XML
    // cannot carry still list.
    if (urlEncoded) object.key = percentDecode(object.key, /*plusIsSpace=*/true);
    GRANARY_ASSIGN_OR_RETURN(const std::string size, childText(contents, "Size"));
    if (!parseNumber(size, object.size) || object.size < 0) {
      return unavailable("key \"" + object.key + "\": <Size> \"" + size + "\" is not a size");
    }
    GRANARY_ASSIGN_OR_RETURN(object.etag, childText(contents, "ETag"));
    GRANARY_ASSIGN_OR_RETURN(const std::string modified, childText(contents, "LastModified"));
    if (!modified.empty()) {
      const auto nanos = parseIso8601UnixNanos(modified);
      if (!nanos) {
        return unavailable("key \"" + object.key + "\": <LastModified> \"" + modified +
                           "\" is not an ISO 8601 time");
      }
      object.modifiedUnixNanos = *nanos;
    }
    page.objects.push_back(std::move(object));
  }
  for (const pugi::xml_node& common : result.children("CommonPrefixes")) {
    GRANARY_ASSIGN_OR_RETURN(std::string prefix, childText(common, "Prefix"));
    if (urlEncoded) prefix = percentDecode(prefix, /*plusIsSpace=*/true);
    page.commonPrefixes.push_back(std::move(prefix));
  }
  return page;
}

Result<S3Location> parseS3Uri(std::string_view uri) {
  constexpr std::string_view kScheme = "s3://";
  const std::string where = "s3 source \"" + std::string(uri) + "\"";
  if (uri.rfind(kScheme, 0) != 0) {
    return invalidArgument(where + ": expected s3://bucket/prefix/");
  }
  const std::string_view rest = uri.substr(kScheme.size());
  const size_t slash = rest.find('/');
  S3Location location;
  location.bucket = std::string(rest.substr(0, slash));
  if (location.bucket.find('@') != std::string::npos) {
    // Do not echo it: what precedes '@' is likely a credential.
    return invalidArgument(
        "s3 source: credentials do not belong in the URI; give them as the source's secret");
  }
  GRANARY_RETURN_IF_ERROR(checkBucket(location.bucket, where));
  if (slash != std::string_view::npos) location.prefix = std::string(rest.substr(slash + 1));
  GRANARY_RETURN_IF_ERROR(checkPrefix(location.prefix, where));
  return location;
}

namespace {

Result<std::unique_ptr<S3Origin>> makeS3(S3OriginOptions options) {
  const std::string where = "s3 origin for bucket \"" + options.bucket + "\"";
  GRANARY_RETURN_IF_ERROR(checkBucket(options.bucket, "s3 origin"));
  GRANARY_RETURN_IF_ERROR(checkPrefix(options.prefix, where));
  if (options.region.empty()) options.region = "us-east-1";
  for (const char c : options.region) {
    // It becomes part of libcurl's "aws:amz:<region>:s3" and of the host name.
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') {
      return invalidArgument(where + ": region \"" + options.region +
                             "\" is not a region name (letters, digits and '-')");
    }
  }
  if (options.accessKeyId.empty() != options.secretAccessKey.empty()) {
    return invalidArgument(where + ": accessKeyId and secretAccessKey go together; " +
                           (options.accessKeyId.empty() ? "accessKeyId" : "secretAccessKey") +
                           " is empty");
  }
  if (!options.sessionToken.empty() && options.accessKeyId.empty()) {
    return invalidArgument(where + ": sessionToken needs accessKeyId and secretAccessKey");
  }
  if (options.listPageSize < 1 || options.listPageSize > 1000) {
    return invalidArgument(where + ": listPageSize " + std::to_string(options.listPageSize) +
                           " is outside 1-1000");
  }

  std::string scheme = "https";
  std::string authority = "s3." + options.region + ".amazonaws.com";
  if (!options.endpoint.empty()) {
    std::string_view endpoint = options.endpoint;
    const size_t schemeEnd = endpoint.find("://");
    if (schemeEnd == std::string_view::npos ||
        (endpoint.substr(0, schemeEnd) != "http" && endpoint.substr(0, schemeEnd) != "https")) {
      return invalidArgument(where + ": endpoint \"" + options.endpoint +
                             "\": expected http(s)://host[:port]");
    }
    scheme = std::string(endpoint.substr(0, schemeEnd));
    endpoint.remove_prefix(schemeEnd + 3);
    if (endpoint.ends_with('/')) endpoint.remove_suffix(1);
    if (endpoint.find('@') != std::string_view::npos) {
      return invalidArgument(where +
                             ": endpoint must not hold credentials; use accessKeyId and "
                             "secretAccessKey");
    }
    if (endpoint.empty() || endpoint.find_first_of("/?#") != std::string_view::npos) {
      return invalidArgument(where + ": endpoint \"" + options.endpoint +
                             "\": expected http(s)://host[:port], without a path");
    }
    authority = std::string(endpoint);
  }
  const bool pathStyle = options.pathStyle.value_or(!options.endpoint.empty());
  const std::string baseUrl = pathStyle ? scheme + "://" + authority + "/" + options.bucket
                                        : scheme + "://" + options.bucket + "." + authority;
  const std::string listUrl = pathStyle ? baseUrl : baseUrl + "/";
  return std::make_unique<S3Origin>(std::move(options), baseUrl, listUrl);
}

}  // namespace

Result<std::unique_ptr<Origin>> makeS3Origin(S3OriginOptions options) {
  GRANARY_ASSIGN_OR_RETURN(auto origin, makeS3(std::move(options)));
  return std::unique_ptr<Origin>(std::move(origin));
}

Result<std::unique_ptr<S3ObjectWriter>> makeS3ObjectWriter(S3OriginOptions options) {
  GRANARY_ASSIGN_OR_RETURN(auto origin, makeS3(std::move(options)));
  return std::unique_ptr<S3ObjectWriter>(std::move(origin));
}

}  // namespace granary::cache
