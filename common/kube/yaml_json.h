// Converts a YAML or JSON document (config::Node) into JSON the API server accepts, resolving
// plain scalars as YAML 1.2's core schema does: true/false, null, integers and floats;
// quoted scalars stay strings. Pure.
#pragma once

#include "common/config.h"
#include "common/kube/object.h"

namespace granary::kube {

Json toJson(const config::Node& node);

// The reverse, for decoding an object the API server sent with the same decodeValue overloads
// as a file: strings become quoted scalars (never read as numbers), numbers and booleans plain
// ones. Paths are field paths from `json` ("spec.cache.replicas"); there is no source or line.
config::Node toConfig(const Json& json);

}  // namespace granary::kube
