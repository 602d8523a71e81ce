#include "engine/origin/origin.h"

namespace granary::cache {

namespace {
constexpr std::string_view kSizeVersionPrefix = "size:";
}  // namespace

std::string sizeVersion(int64_t size) {
  return std::string(kSizeVersionPrefix) + std::to_string(size);
}

bool isSizeVersion(std::string_view version) { return version.starts_with(kSizeVersionPrefix); }

Status Origin::listAfter(const std::string& after,
                         const std::function<Status(std::vector<OriginObject>&&)>&) {
  return failedPrecondition("this origin lists from its start only, not after \"" + after + "\"");
}

}  // namespace granary::cache
