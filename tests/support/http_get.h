// Plain HTTP requests on loopback for tests of served endpoints (libcurl).
#pragma once

#include <string>

namespace granary::testing {

// Returns the HTTP status (0 when the request failed) and appends the body to `body`.
long httpGet(const std::string& url, std::string& body);
// POSTs `request` as application/json; same return as httpGet.
long httpPost(const std::string& url, const std::string& request, std::string& body);

}  // namespace granary::testing
