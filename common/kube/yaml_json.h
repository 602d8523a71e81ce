// Converts a YAML or JSON document (config::Node) into JSON the API server accepts, resolving
// plain scalars as YAML 1.2's core schema does: true/false, null, integers and floats;
// quoted scalars stay strings. Pure.
#pragma once

#include "common/config.h"
#include "common/kube/object.h"

namespace granary::kube {

Json toJson(const config::Node& node);

}  // namespace granary::kube
