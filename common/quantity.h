// Pure parsers for the sizes, rates and durations people write in manifests and options.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace granary {

// A non-negative number of bytes.
struct ByteSize {
  int64_t bytes = 0;
  friend auto operator<=>(const ByteSize&, const ByteSize&) = default;
};

// Parses a Kubernetes resource quantity as whole bytes: "1073741824", "500Gi", "1.5Ti",
// "100M", "2e9". Binary suffixes Ki Mi Gi Ti Pi Ei, decimal k M G T P E. Errors:
// InvalidArgument for malformed text, negative values, fractions of a byte, or overflow.
Result<ByteSize> parseByteSize(std::string_view text);

// Renders bytes with a binary suffix and up to one decimal, e.g. "1.5Gi", "512", "10Ti".
std::string formatByteSize(ByteSize size);

// Parses a duration as Go and Kubernetes write them: "30s", "5m", "1h30m", "250ms", "1.5h",
// units ns us ms s m h. A bare "0" is zero. Errors: InvalidArgument for anything else or
// negative values.
Result<std::chrono::nanoseconds> parseDuration(std::string_view text);

}  // namespace granary
