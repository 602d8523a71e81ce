// Secret: a credential (token, key, password) that must never reach logs, events, status
// or error messages. Streaming or logging a Secret prints "<redacted>"; the value is only
// reachable through the explicit reveal(), which is grep-able in review.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace granary {

class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}

  // The plain value, for the one place that hands it to an origin or a peer.
  const std::string& reveal() const { return value_; }
  bool empty() const { return value_.empty(); }
  // Whether `presented` is this value, compared in a time that does not depend on where the two
  // differ.
  bool matches(std::string_view presented) const {
    unsigned char diff = presented.size() == value_.size() ? 0 : 1;
    for (size_t i = 0; i < presented.size(); ++i)
      diff |= presented[i] ^ (i < value_.size() ? value_[i] : 0);
    return diff == 0;
  }

  friend bool operator==(const Secret&, const Secret&) = default;
  friend std::ostream& operator<<(std::ostream& out, const Secret&) { return out << "<redacted>"; }

 private:
  std::string value_;
};

}  // namespace granary
