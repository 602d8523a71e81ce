#include "engine/origin/curl_transfer.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdlib>
#include <thread>

#include "common/backoff.h"

namespace granary::cache {
namespace {

size_t onBody(char* data, size_t size, size_t count, void* out) {
  static_cast<HttpResponse*>(out)->body.append(data, size * count);
  return size * count;
}

size_t onHeader(char* data, size_t size, size_t count, void* out) {
  auto& response = *static_cast<HttpResponse*>(out);
  std::string line(data, size * count);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  const auto colon = line.find(':');
  if (colon == std::string::npos) {
    // A status line: a redirect or a "100 Continue" starts a new response.
    if (line.rfind("HTTP/", 0) == 0) response = HttpResponse{};
    return size * count;
  }
  std::string name = line.substr(0, colon);
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = line.substr(colon + 1);
  value.erase(0, value.find_first_not_of(' '));
  if (name == "etag") response.etag = value;
  if (name == "last-modified") response.lastModified = value;
  if (name == "content-range") response.contentRange = value;
  if (name == "content-length") response.contentLength = std::atoll(value.c_str());
  return size * count;
}

}  // namespace

CurlTransfer::CurlTransfer(CurlTransferOptions options) : options_(options) {
  if (options_.maxAttempts < 1) options_.maxAttempts = 1;
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

CurlTransfer::~CurlTransfer() {
  for (CURL* handle : idle_) curl_easy_cleanup(handle);
}

Result<HttpResponse> CurlTransfer::send(const HttpRequest& request) {
  const std::string method = !request.method.empty() ? request.method
                             : request.head          ? "HEAD"
                                                     : "GET";
  const std::string what = method + " " + request.url;
  Backoff backoff({.initial = options_.retryDelay, .max = std::chrono::milliseconds(5000)});
  Status last;
  for (int attempt = 1; attempt <= options_.maxAttempts; ++attempt) {
    HttpResponse r;
    CURL* curl = acquire();
    curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
    if (request.head) curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    if (!request.method.empty()) {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
      if (request.method != "DELETE") {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(request.body.size()));
      }
    }
    if (request.range) curl_easy_setopt(curl, CURLOPT_RANGE, request.range->text().c_str());
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, onBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, onHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(options_.timeout.count()));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT,
                     static_cast<long>(options_.connectTimeout.count()));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (request.followRedirects) {
      curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
      curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
    }
    if (request.pathAsIs) curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
    if (!request.awsSigV4.empty()) {
      curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, request.awsSigV4.c_str());
      // Separate fields rather than CURLOPT_USERPWD "id:secret": a ':' in a secret stays intact.
      curl_easy_setopt(curl, CURLOPT_USERNAME, request.username.reveal().c_str());
      curl_easy_setopt(curl, CURLOPT_PASSWORD, request.password.reveal().c_str());
    }
    curl_slist* headers = nullptr;
    for (const auto& line : request.headers) headers = curl_slist_append(headers, line.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    const CURLcode code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    release(curl);  // before the list it points to goes: release() resets the handle
    curl_slist_free_all(headers);

    if (code != CURLE_OK) {
      last = unavailable(what + ": " + curl_easy_strerror(code));
    } else if (r.status >= 500 || r.status == 429) {
      last = unavailable(what + ": HTTP " + std::to_string(r.status));
    } else if (request.checkBodyLength && r.status >= 200 && r.status < 300 &&
               r.contentLength >= 0 && static_cast<int64_t>(r.body.size()) != r.contentLength) {
      last = unavailable(what + ": body truncated");
    } else {
      return r;
    }
    if (attempt < options_.maxAttempts) {
      ++retries_;
      if (retryGate_)
        retryGate_(request.range ? request.range->length : static_cast<int64_t>(r.body.size()));
      std::this_thread::sleep_for(backoff.next());
    }
  }
  return last;
}

CURL* CurlTransfer::acquire() {
  MutexLock lock(mutex_);
  if (idle_.empty()) return curl_easy_init();
  CURL* handle = idle_.back();
  idle_.pop_back();
  return handle;
}

void CurlTransfer::release(CURL* handle) {
  // Forget this request's options (credentials, headers); the connection cache survives a reset,
  // so the next request still reuses the connection.
  curl_easy_reset(handle);
  MutexLock lock(mutex_);
  idle_.push_back(handle);
}

}  // namespace granary::cache
