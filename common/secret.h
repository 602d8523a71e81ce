// Secret: a credential (token, key, password) that must never reach logs, events, status
// or error messages. Streaming or logging a Secret prints "<redacted>"; the value is only
// reachable through the explicit reveal(), which is grep-able in review.
#pragma once

#include <ostream>
#include <string>
#include <utility>

namespace granary {

class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : value_(std::move(value)) {}

  // The plain value, for the one place that hands it to an origin or a peer.
  const std::string& reveal() const { return value_; }
  bool empty() const { return value_.empty(); }

  friend bool operator==(const Secret&, const Secret&) = default;
  friend std::ostream& operator<<(std::ostream& out, const Secret&) { return out << "<redacted>"; }

 private:
  std::string value_;
};

}  // namespace granary
