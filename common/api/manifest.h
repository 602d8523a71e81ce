// Reading granary manifests from files: every document of a known kind is decoded; other
// kinds (Secrets, ConfigMaps, ...) are listed as skipped so a multi-document file of a whole
// deployment can be validated at once.
#pragma once

#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "common/api/dataset.h"
#include "common/api/training_job.h"
#include "common/names.h"

namespace granary::api {

inline constexpr std::string_view kApiVersion = names::kGroupVersion;

// A document that is not a granary resource.
struct OtherObject {
  std::string apiVersion;
  std::string kind;
  std::string name;
};

using Object = std::variant<Dataset, TrainingJob, OtherObject>;

struct ManifestDocument {
  std::string where;  // file:line of the document
  Object object;
};

// Decodes one document. InvalidArgument naming every bad field.
Result<Object> decodeObject(const config::Node& document);

// Decodes every document of a file, or of every *.yaml, *.yml and *.json file under a
// directory (recursively, in name order). Errors of all documents are reported together.
Result<std::vector<ManifestDocument>> loadManifests(const std::filesystem::path& path);

}  // namespace granary::api
