#include "cache-node/origin/http_origin.h"

#include <cpprest/json.h>
#include <curl/curl.h>

#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "common/backoff.h"
#include "common/url.h"

namespace granary::cache {
namespace {

struct Response {
  long status = 0;
  std::string body;
  std::string etag;
  std::string lastModified;
  int64_t contentLength = -1;
};

size_t onBody(char* data, size_t size, size_t count, void* out) {
  static_cast<Response*>(out)->body.append(data, size * count);
  return size * count;
}

size_t onHeader(char* data, size_t size, size_t count, void* out) {
  auto& response = *static_cast<Response*>(out);
  std::string line(data, size * count);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  const auto colon = line.find(':');
  if (colon == std::string::npos) return size * count;
  std::string name = line.substr(0, colon);
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = line.substr(colon + 1);
  value.erase(0, value.find_first_not_of(' '));
  if (name == "etag") response.etag = value;
  if (name == "last-modified") response.lastModified = value;
  if (name == "content-length") response.contentLength = std::atoll(value.c_str());
  return size * count;
}

std::string encodePath(const std::string& path) { return percentEncode(path, "/"); }

std::string versionOf(const Response& r) { return !r.etag.empty() ? r.etag : r.lastModified; }

class HttpOrigin final : public Origin {
 public:
  explicit HttpOrigin(HttpOriginOptions options) : options_(std::move(options)) {}

  ~HttpOrigin() override {
    for (CURL* handle : idle_) curl_easy_cleanup(handle);
  }

  Status list(const std::function<Status(std::vector<OriginObject>&&)>& each) override {
    if (!options_.index.empty()) return listIndex(each);
    return crawl("", each);
  }

  Result<std::string> read(const std::string& path, int64_t offset, int64_t length,
                           const std::string& etag) override {
    if (length <= 0) return std::string();
    const std::string range = std::to_string(offset) + "-" + std::to_string(offset + length - 1);
    GRANARY_ASSIGN_OR_RETURN(Response r, send(encodePath(path), "GET", range, length));
    if (r.status == 404) return notFound(path + " is gone from the origin");
    if (r.status == 416) return std::string();  // at or past the end
    if (!etag.empty() && versionOf(r) != etag) {
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
  // One request with retries. `expectBytes` >= 0 makes a short body a (retryable) failure.
  Result<Response> send(const std::string& relative, const char* method, const std::string& range,
                        int64_t expectBytes = -1) {
    const std::string url = options_.baseUrl + relative;
    Backoff backoff({.initial = options_.retryDelay, .max = std::chrono::milliseconds(5000)});
    Status last;
    for (int attempt = 1; attempt <= options_.maxAttempts; ++attempt) {
      Response r;
      CURL* curl = acquire();
      curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
      curl_easy_setopt(curl, CURLOPT_NOBODY, std::string(method) == "HEAD" ? 1L : 0L);
      curl_easy_setopt(curl, CURLOPT_HTTPGET, std::string(method) == "GET" ? 1L : 0L);
      curl_easy_setopt(curl, CURLOPT_RANGE, range.empty() ? nullptr : range.c_str());
      curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, onBody);
      curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
      curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, onHeader);
      curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r);
      curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(options_.timeout.count()));
      curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
      curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
      curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
      curl_slist* headers = nullptr;
      const std::string auth = "Authorization: Bearer " + options_.bearerToken.reveal();
      if (!options_.bearerToken.empty()) headers = curl_slist_append(headers, auth.c_str());
      curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
      const CURLcode code = curl_easy_perform(curl);
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
      curl_slist_free_all(headers);
      release(curl);

      if (code != CURLE_OK) {
        last = unavailable(std::string(method) + " " + url + ": " + curl_easy_strerror(code));
      } else if (r.status >= 500 || r.status == 429) {
        last = unavailable(std::string(method) + " " + url + ": HTTP " + std::to_string(r.status));
      } else if (expectBytes >= 0 && r.status == 206 && r.contentLength >= 0 &&
                 static_cast<int64_t>(r.body.size()) != r.contentLength) {
        last = unavailable(std::string(method) + " " + url + ": body truncated");
      } else {
        return r;
      }
      if (attempt < options_.maxAttempts) std::this_thread::sleep_for(backoff.next());
    }
    return last;
  }

  static Status statusFor(const Response& r, const std::string& what) {
    if (r.status == 401)
      return {StatusCode::kUnauthenticated, what + ": the origin wants credentials"};
    if (r.status == 403)
      return {StatusCode::kPermissionDenied, what + ": the origin refused access"};
    if (r.status == 404) return notFound(what + " is not at the origin");
    return unavailable(what + ": HTTP " + std::to_string(r.status));
  }

  Status listIndex(const std::function<Status(std::vector<OriginObject>&&)>& each) {
    GRANARY_ASSIGN_OR_RETURN(Response r, send(encodePath(options_.index), "GET", ""));
    if (r.status != 200) return statusFor(r, "index " + options_.index);
    web::json::value index;
    try {
      index = web::json::value::parse(r.body);
    } catch (const std::exception& e) {
      return invalidArgument("index " + options_.index + " is not JSON: " + e.what());
    }
    if (!index.has_array_field("files")) {
      return invalidArgument("index " + options_.index +
                             ": expected {\"files\": [{\"path\", \"size\", \"etag\"}]}");
    }
    std::vector<OriginObject> batch;
    for (const auto& f : index.at("files").as_array()) {
      if (!f.has_string_field("path") || !f.has_number_field("size")) {
        return invalidArgument("index " + options_.index + ": every file needs path and size");
      }
      OriginObject o;
      o.path = f.at("path").as_string();
      o.size = f.at("size").as_number().to_int64();
      if (f.has_string_field("etag")) o.etag = f.at("etag").as_string();
      batch.push_back(std::move(o));
    }
    return batch.empty() ? Status::ok() : each(std::move(batch));
  }

  // Walks an autoindex page: links ending in '/' are sub-directories, others files (sized by HEAD).
  Status crawl(const std::string& directory,
               const std::function<Status(std::vector<OriginObject>&&)>& each) {
    GRANARY_ASSIGN_OR_RETURN(Response page, send(encodePath(directory), "GET", ""));
    if (page.status != 200) return statusFor(page, "listing of /" + directory);
    static const std::regex kHref("href=\"([^\"]+)\"", std::regex::icase);
    std::set<std::string> seen;
    std::vector<OriginObject> batch;
    for (auto it = std::sregex_iterator(page.body.begin(), page.body.end(), kHref);
         it != std::sregex_iterator(); ++it) {
      std::string link = (*it)[1];
      // Only plain relative children: no parents, sort links, absolute or external URLs.
      if (link.empty() || link[0] == '?' || link[0] == '/' || link[0] == '#' ||
          link.rfind("..", 0) == 0 || link.find("://") != std::string::npos ||
          link.find('?') != std::string::npos) {
        continue;
      }
      link = percentDecode(link);
      if (link.rfind("./", 0) == 0) link = link.substr(2);
      if (!seen.insert(link).second) continue;
      if (link.back() == '/') {
        GRANARY_RETURN_IF_ERROR(crawl(directory + link, each));
        continue;
      }
      const std::string path = directory + link;
      GRANARY_ASSIGN_OR_RETURN(Response head, send(encodePath(path), "HEAD", ""));
      if (head.status != 200) return statusFor(head, path);
      OriginObject o;
      o.path = path;
      o.size = std::max<int64_t>(0, head.contentLength);
      o.etag = versionOf(head);
      batch.push_back(std::move(o));
    }
    return batch.empty() ? Status::ok() : each(std::move(batch));
  }

  CURL* acquire() {
    std::lock_guard lock(mutex_);
    if (idle_.empty()) return curl_easy_init();
    CURL* handle = idle_.back();
    idle_.pop_back();
    return handle;
  }
  void release(CURL* handle) {
    std::lock_guard lock(mutex_);
    idle_.push_back(handle);  // kept for connection reuse
  }

  HttpOriginOptions options_;
  std::mutex mutex_;  // guards idle_
  std::vector<CURL*> idle_;
};

}  // namespace

Result<std::unique_ptr<Origin>> makeHttpOrigin(HttpOriginOptions options) {
  const std::string& url = options.baseUrl;
  if ((url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) || url.back() != '/') {
    return invalidArgument("http source \"" + url +
                           "\": expected http(s)://host/path/ ending in '/'");
  }
  if (options.maxAttempts < 1) options.maxAttempts = 1;
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::unique_ptr<Origin>(new HttpOrigin(std::move(options)));
}

}  // namespace granary::cache
