// JSON merge patch (RFC 7386). Pure.
#pragma once

#include <cpprest/json.h>

namespace granary::kube {

// Applies `patch` to `target`: objects merge recursively, null removes a field, anything
// else replaces.
web::json::value applyMergePatch(const web::json::value& target, const web::json::value& patch);

}  // namespace granary::kube
