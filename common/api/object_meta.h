// The parts of metav1.ObjectMeta granary reads, and the Kubernetes name rules.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/config.h"

namespace granary::api {

struct ObjectMeta {
  std::string name;
  std::string namespace_;  // "" means the default namespace of the context
  std::string uid;
  std::string resourceVersion;
  int64_t generation = 0;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
};

// Decodes metadata; unknown fields (managedFields, ownerReferences, ...) are ignored, as a
// client of the API server must.
Status decodeValue(const config::Node& node, ObjectMeta& out);

// RFC 1123 label: at most 63 lower-case alphanumerics or '-', alphanumeric at both ends.
bool isDnsLabel(std::string_view name);
// RFC 1123 subdomain: at most 253 characters, dot-separated labels.
bool isDnsSubdomain(std::string_view name);

}  // namespace granary::api
