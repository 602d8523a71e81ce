// Percent-encoding of URL parts (RFC 3986). Pure.
#pragma once

#include <string>
#include <string_view>

namespace granary {

// Encodes every byte but the unreserved characters (A-Z a-z 0-9 - . _ ~) and those in `keep`
// (e.g. "/" for paths) as %XX.
std::string percentEncode(std::string_view text, std::string_view keep = {});

// Decodes %XX escapes, and '+' as a space when `plusIsSpace` (query strings). A malformed
// escape is kept as written.
std::string percentDecode(std::string_view text, bool plusIsSpace = false);

}  // namespace granary
