#include "common/quantity.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

namespace granary {
namespace {

struct Suffix {
  std::string_view text;
  long double factor;
};

constexpr Suffix kByteSuffixes[] = {
    {"Ki", 1024.0L},
    {"Mi", 1048576.0L},
    {"Gi", 1073741824.0L},
    {"Ti", 1099511627776.0L},
    {"Pi", 1125899906842624.0L},
    {"Ei", 1152921504606846976.0L},
    {"k", 1e3L},
    {"M", 1e6L},
    {"G", 1e9L},
    {"T", 1e12L},
    {"P", 1e15L},
    {"E", 1e18L},
};

Status badQuantity(std::string_view text) {
  return invalidArgument("\"" + std::string(text) +
                         "\" is not a byte quantity; write a whole number of bytes or a number "
                         "with a suffix such as 500Mi, 100Gi or 2Ti");
}

// Reads an unsigned decimal with an optional fraction; advances `pos`. False if no digits.
bool readDecimal(std::string_view text, size_t& pos, long double& out) {
  const size_t start = pos;
  long double value = 0;
  bool digits = false;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    value = value * 10 + (text[pos++] - '0');
    digits = true;
  }
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    long double scale = 0.1L;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      value += (text[pos++] - '0') * scale;
      scale /= 10;
      digits = true;
    }
  }
  if (!digits) pos = start;
  out = value;
  return digits;
}

}  // namespace

Result<ByteSize> parseByteSize(std::string_view text) {
  size_t pos = 0;
  long double value = 0;
  if (!readDecimal(text, pos, value)) return badQuantity(text);
  std::string_view rest = text.substr(pos);
  long double factor = 1;
  if (!rest.empty() && (rest[0] == 'e' || rest[0] == 'E') && rest.size() > 1 &&
      std::isdigit(static_cast<unsigned char>(rest[1]))) {
    int exponent = 0;
    for (char c : rest.substr(1)) {
      if (!std::isdigit(static_cast<unsigned char>(c)) || exponent > 30) return badQuantity(text);
      exponent = exponent * 10 + (c - '0');
    }
    factor = std::pow(10.0L, exponent);
  } else if (!rest.empty()) {
    bool known = false;
    for (const auto& suffix : kByteSuffixes) {
      if (rest == suffix.text) {
        factor = suffix.factor;
        known = true;
        break;
      }
    }
    if (!known) return badQuantity(text);
  }
  const long double bytes = value * factor;
  if (bytes > static_cast<long double>(std::numeric_limits<int64_t>::max())) {
    return invalidArgument("\"" + std::string(text) + "\" is larger than 8Ei");
  }
  if (std::fabs(bytes - std::round(bytes)) > 1e-6L) {
    return invalidArgument("\"" + std::string(text) + "\" is not a whole number of bytes");
  }
  return ByteSize{static_cast<int64_t>(std::llround(bytes))};
}

std::string formatByteSize(ByteSize size) {
  static constexpr std::string_view kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  long double value = static_cast<long double>(size.bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  if (unit == 0 || value == std::floor(value)) {
    std::snprintf(buffer, sizeof buffer, "%.0Lf%s", value, kUnits[unit].data());
  } else {
    std::snprintf(buffer, sizeof buffer, "%.1Lf%s", value, kUnits[unit].data());
  }
  return buffer;
}

Result<std::chrono::nanoseconds> parseDuration(std::string_view text) {
  auto bad = [&] {
    return invalidArgument("\"" + std::string(text) +
                           "\" is not a duration; write a number with a unit such as 250ms, "
                           "30s, 5m or 1h30m");
  };
  if (text == "0") return std::chrono::nanoseconds(0);
  if (text.empty()) return bad();
  long double total = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    long double value = 0;
    if (!readDecimal(text, pos, value)) return bad();
    size_t end = pos;
    while (end < text.size() && std::isalpha(static_cast<unsigned char>(text[end]))) ++end;
    const std::string_view unit = text.substr(pos, end - pos);
    long double scale;
    if (unit == "ns")
      scale = 1;
    else if (unit == "us")
      scale = 1e3L;
    else if (unit == "ms")
      scale = 1e6L;
    else if (unit == "s")
      scale = 1e9L;
    else if (unit == "m")
      scale = 60e9L;
    else if (unit == "h")
      scale = 3600e9L;
    else
      return bad();
    total += value * scale;
    pos = end;
  }
  if (total > static_cast<long double>(std::numeric_limits<int64_t>::max())) return bad();
  return std::chrono::nanoseconds(static_cast<int64_t>(std::llround(total)));
}

}  // namespace granary
