#include "common/kube/api_error.h"

#include <cpprest/json.h>

#include <charconv>

namespace granary::kube {

Status statusFromHttp(int httpStatus, std::string_view body, std::string_view operation) {
  std::string message;
  std::string reason;
  try {
    const auto json = web::json::value::parse(std::string(body));
    if (json.is_object() && json.has_string_field("message")) {
      message = json.at("message").as_string();
    }
    if (json.is_object() && json.has_string_field("reason")) reason = json.at("reason").as_string();
  } catch (const std::exception&) {
    // Not a metav1.Status: show the start of what came back.
  }
  if (message.empty()) {
    std::string shown(body.substr(0, 200));
    message = "HTTP " + std::to_string(httpStatus) +
              (shown.empty() ? "" : ": \"" + shown + (body.size() > 200 ? "...\"" : "\""));
  }
  message = std::string(operation) + ": " + message;

  StatusCode code;
  switch (httpStatus) {
    case 400:
    case 422:
      code = StatusCode::kInvalidArgument;
      break;
    case 401:
      code = StatusCode::kUnauthenticated;
      break;
    case 403:
      code = StatusCode::kPermissionDenied;
      break;
    case 404:
      code = StatusCode::kNotFound;
      break;
    case 409:
      code = reason == "AlreadyExists" ? StatusCode::kAlreadyExists : StatusCode::kConflict;
      break;
    case 410:
      code = StatusCode::kGone;
      break;
    case 429:
      code = StatusCode::kResourceExhausted;
      break;
    case 504:
      code = StatusCode::kDeadlineExceeded;
      break;
    default:
      code = httpStatus >= 500 ? StatusCode::kUnavailable : StatusCode::kInternal;
  }
  return {code, std::move(message)};
}

bool isRetryable(const Status& status) {
  switch (status.code()) {
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return true;
    default:
      return false;
  }
}

std::optional<int> parseRetryAfterSeconds(std::string_view header) {
  int seconds = 0;
  const auto [end, error] = std::from_chars(header.data(), header.data() + header.size(), seconds);
  if (error != std::errc() || end != header.data() + header.size() || seconds < 0) {
    return std::nullopt;
  }
  return seconds;
}

}  // namespace granary::kube
