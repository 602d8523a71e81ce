#include "common/status.h"

#include <ostream>

namespace granary {

std::string_view statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kCancelled:
      return "cancelled";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kAlreadyExists:
      return "already_exists";
    case StatusCode::kPermissionDenied:
      return "permission_denied";
    case StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case StatusCode::kFailedPrecondition:
      return "failed_precondition";
    case StatusCode::kConflict:
      return "conflict";
    case StatusCode::kGone:
      return "gone";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kCorruption:
      return "corruption";
    case StatusCode::kUnauthenticated:
      return "unauthenticated";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

Status Status::withContext(std::string_view context) const {
  if (isOk()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  return {code_, std::move(message)};
}

std::string Status::toString() const {
  if (isOk()) return "ok";
  std::string out(statusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

std::ostream& operator<<(std::ostream& out, const Status& status) {
  return out << status.toString();
}

}  // namespace granary
