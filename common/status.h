// The one error type of granary: a code from a short enum plus a message a person can act on.
//
// Status is cheap to copy when OK (an enum and an empty string). Functions that can fail
// return Status or Result<T> (result.h), both [[nodiscard]]. Exceptions never cross module
// boundaries: adapters catch third-party exceptions and turn them into a Status.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>

namespace granary {

// Codes mirror gRPC's canonical codes where one fits, so adapters translate one to one.
enum class StatusCode {
  kOk = 0,
  kCancelled,           // the caller stopped the operation
  kInvalidArgument,     // bad input: the message names the field and the fix
  kDeadlineExceeded,    // a timeout elapsed
  kNotFound,            // the named object does not exist
  kAlreadyExists,       // create of an object that exists
  kPermissionDenied,    // authenticated but not allowed
  kResourceExhausted,   // quota, capacity or rate limit
  kFailedPrecondition,  // the system is not in the state the operation needs
  kConflict,            // stale version (HTTP 409, optimistic concurrency)
  kGone,                // a version too old to serve (HTTP 410): start again from scratch
  kUnavailable,         // transient: retry with backoff
  kCorruption,          // data failed verification
  kUnauthenticated,     // missing or bad credentials
  kInternal,            // a bug or an impossible state
};

// Stable lower-case name of a code, e.g. "invalid_argument".
std::string_view statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool isOk() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is prefixed with `context: ` (OK stays OK).
  Status withContext(std::string_view context) const;

  // "ok" or "<code name>: <message>".
  std::string toString() const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

std::ostream& operator<<(std::ostream& out, const Status& status);

// Shorthands for the common codes.
inline Status invalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status notFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status alreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status failedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status resourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
inline Status internalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

}  // namespace granary

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define GRANARY_RETURN_IF_ERROR(expr)                                          \
  do {                                                                         \
    if (::granary::Status granary_status_ = (expr); !granary_status_.isOk()) { \
      return granary_status_;                                                  \
    }                                                                          \
  } while (false)
