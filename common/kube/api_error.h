// Translation of API-server responses into Status. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace granary::kube {

// Maps an HTTP status and the body of the response (a metav1.Status, when the server sent
// one) to a Status: 404 NotFound, 409 Conflict (AlreadyExists when the reason says so),
// 410 Gone, 400/422 InvalidArgument, 401 Unauthenticated, 403 PermissionDenied,
// 429 ResourceExhausted, 5xx Unavailable, 504 DeadlineExceeded. The message is the server's
// own, prefixed with `operation`; a body that is not JSON is quoted, shortened.
Status statusFromHttp(int httpStatus, std::string_view body, std::string_view operation);

// Whether a failed request may be sent again: 429, 5xx and transport failures (Unavailable,
// DeadlineExceeded); never other 4xx.
bool isRetryable(const Status& status);

// Parses a Retry-After header given in seconds ("3"); nullopt for anything else.
std::optional<int> parseRetryAfterSeconds(std::string_view header);

}  // namespace granary::kube
