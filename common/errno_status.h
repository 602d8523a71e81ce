// A failed system call's errno as granary's error type.
#pragma once

#include <string_view>

#include "common/status.h"

namespace granary {

// "<what>: <strerror>", as ResourceExhausted for a full disk or quota (ENOSPC, EDQUOT),
// PermissionDenied for EACCES and EPERM, Unavailable otherwise.
Status errnoStatus(int error, std::string_view what);

}  // namespace granary
