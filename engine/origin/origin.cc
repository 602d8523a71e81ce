#include "engine/origin/origin.h"

namespace granary::cache {

namespace {
constexpr std::string_view kSizeVersionPrefix = "size:";
}  // namespace

std::string sizeVersion(int64_t size) {
  return std::string(kSizeVersionPrefix) + std::to_string(size);
}

bool isSizeVersion(std::string_view version) { return version.starts_with(kSizeVersionPrefix); }

Result<std::vector<KeyRange>> Origin::split(size_t) { return std::vector<KeyRange>{KeyRange{}}; }

Status Origin::listRange(const KeyRange& range,
                         const std::function<Status(std::vector<OriginObject>&&)>&) {
  return failedPrecondition("this origin lists from its start to its end only, not after \"" +
                            range.after + "\"");
}

}  // namespace granary::cache
