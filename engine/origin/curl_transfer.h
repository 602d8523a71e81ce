// HTTP requests for the origins that speak HTTP (http(s)://, s3://): libcurl easy handles kept
// in a pool so connections are reused, and one request with retries of transient failures.
// Origins build the request (URL, range, headers, signing) and map the final status code to
// their errors; this file knows nothing of any origin's protocol.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/secret.h"
#include "common/thread_annotations.h"

using CURL = void;  // libcurl's easy handle; keeps <curl/curl.h> out of the origins' headers

namespace granary::cache {

// `length` > 0 bytes from `offset`.
struct ByteRange {
  int64_t offset = 0;
  int64_t length = 0;
  // "first-last" (inclusive), as a Range header names it.
  std::string text() const {
    return std::to_string(offset) + "-" + std::to_string(offset + length - 1);
  }
};

struct HttpRequest {
  // Fully encoded absolute URL. Appears in error messages, so it must hold no credentials.
  std::string url;
  // HEAD instead of GET.
  bool head = false;
  // Another method ("PUT", "POST", "DELETE"), sending `body` (which may be empty). "" for GET or
  // HEAD.
  std::string method;
  std::string body;
  // The bytes asked for, sent as Range; none asks for the whole body.
  std::optional<ByteRange> range;
  // Extra header lines, "Name: value". May carry credentials: never logged or put in errors.
  std::vector<std::string> headers;
  // libcurl's CURLOPT_AWS_SIGV4 provider string ("aws:amz:<region>:<service>"): libcurl signs
  // the request with `username` / `password` as access key id / secret key. Empty: unsigned.
  std::string awsSigV4;
  Secret username;
  Secret password;
  // Follow 3xx redirects (at most 5). Signed requests should not: the signature names the host.
  bool followRedirects = false;
  // Send the path exactly as given: no squashing of "/../" and "/./" (object keys may hold them).
  bool pathAsIs = false;
  // A 2xx body shorter than its Content-Length is a failure (retried), never returned.
  bool checkBodyLength = false;
};

struct HttpResponse {
  long status = 0;  // libcurl's type for the response code
  std::string body;
  std::string etag;            // the ETag header as sent, quotes included; "" when absent
  std::string lastModified;    // the Last-Modified header; "" when absent
  std::string contentRange;    // the Content-Range header ("bytes 0-9/100"); "" when absent
  int64_t contentLength = -1;  // -1 when absent
};

struct CurlTransferOptions {
  // Whole-request limit (connect, headers and body). Default 30 s.
  std::chrono::seconds timeout{30};
  // Connection limit, within `timeout`. Default 10 s.
  std::chrono::seconds connectTimeout{10};
  // Attempts per request for transient failures. Default 4; values below 1 mean 1.
  int maxAttempts = 4;
  // First retry delay; doubles with jitter up to 5 s. Default 100 ms.
  std::chrono::milliseconds retryDelay{100};
};

// Thread-safe: concurrent send() calls each take their own handle from the pool. Handles (and
// with them their open connections) live as long as the CurlTransfer.
class CurlTransfer {
 public:
  explicit CurlTransfer(CurlTransferOptions options);
  ~CurlTransfer();
  CurlTransfer(const CurlTransfer&) = delete;
  CurlTransfer& operator=(const CurlTransfer&) = delete;

  // Sends `request`. Transport errors (timeouts, resets, refused connections), 5xx, 429 and
  // short bodies (see checkBodyLength) are retried with jittered backoff; after the last attempt
  // they become Unavailable. Any other response is returned whatever its status, for the caller
  // to interpret.
  Result<HttpResponse> send(const HttpRequest& request);

  // Requests sent again after a transient failure, since construction.
  int64_t retries() const { return retries_.load(); }
  // Called before a failed attempt is sent again, with the bytes the new attempt asks for: its
  // range's length, or for a whole body what the failed attempt received. It may block (a
  // bandwidth limit waits there). Set before the first send().
  void setRetryGate(std::function<void(int64_t bytes)> gate) { retryGate_ = std::move(gate); }

 private:
  CURL* acquire();
  void release(CURL* handle);

  CurlTransferOptions options_;
  Mutex mutex_;
  std::vector<CURL*> idle_ GRANARY_GUARDED_BY(mutex_);
  std::atomic<int64_t> retries_{0};
  std::function<void(int64_t)> retryGate_;  // set before the first send(), then only read
};

}  // namespace granary::cache
