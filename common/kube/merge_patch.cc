#include "common/kube/merge_patch.h"

#include "common/kube/object.h"

namespace granary::kube {

web::json::value applyMergePatch(const web::json::value& target, const web::json::value& patch) {
  if (!patch.is_object()) return patch;
  web::json::value result = target.is_object() ? target : web::json::value::object();
  for (const auto& [key, value] : patch.as_object()) {
    if (value.is_null()) {
      eraseField(result, key);
    } else {
      const bool present = result.has_field(key);
      result[key] = applyMergePatch(present ? result.at(key) : web::json::value::null(), value);
    }
  }
  return result;
}

}  // namespace granary::kube
