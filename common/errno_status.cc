#include "common/errno_status.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace granary {

Status errnoStatus(int error, std::string_view what) {
  std::string message = std::string(what) + ": " + std::strerror(error);
  if (error == ENOSPC || error == EDQUOT) return resourceExhausted(std::move(message));
  if (error == EACCES || error == EPERM) return {StatusCode::kPermissionDenied, std::move(message)};
  return unavailable(std::move(message));
}

}  // namespace granary
