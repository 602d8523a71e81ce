// http(s):// origins: files served by any web server. The listing comes from a JSON index
// ({"files":[{"path","size","etag"}]}, named by the source option "index") or, without one,
// from the server's directory listing (an nginx or Apache autoindex page, crawled), with
// sizes and versions from HEAD. Data comes by ranged GET; the ETag (or Last-Modified) of every
// response is checked against the listed version. Connections are reused; 5xx, 429,
// timeouts, resets and truncated bodies are retried with jittered backoff.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/secret.h"
#include "engine/origin/origin.h"

namespace granary::cache {

struct HttpOriginOptions {
  // The source URI, ending in '/' (a directory): https://data.example.org/coco/.
  std::string baseUrl;
  // A JSON index relative to baseUrl (e.g. "index.json"); empty crawls the directory listing.
  std::string index;
  // Sent as "Authorization: Bearer ..." when set.
  Secret bearerToken;
  // Per request. Default 30 s.
  std::chrono::seconds timeout{30};
  // Attempts per request for transient failures. Default 4.
  int maxAttempts = 4;
  // First retry delay; doubles with jitter up to 5 s. Default 100 ms.
  std::chrono::milliseconds retryDelay{100};
};

// InvalidArgument when the URL is not http(s):// or does not end in '/'.
Result<std::unique_ptr<Origin>> makeHttpOrigin(HttpOriginOptions options);

// ---- Pure pieces of the listing, exposed for tests. ----

// The files of a JSON index, {"files":[{"path","size","etag"}]}; a file without an etag gets
// sizeVersion(size). InvalidArgument when the text is not such an index, or a size is not a
// whole number of bytes.
Result<std::vector<OriginObject>> parseHttpIndex(std::string_view json);

// The links of an autoindex page (nginx, Apache) that name the directory's own entries,
// percent-decoded, each once, in page order; sub-directories end in '/'. Parent, sort, absolute
// and external links are left out, and so is any link that is not a path the manifest takes
// (validateManifestPath: no empty, "." or ".." segment, no NUL) once decoded.
std::vector<std::string> autoindexLinks(std::string_view page);

}  // namespace granary::cache
