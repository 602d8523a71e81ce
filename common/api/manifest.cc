#include "common/api/manifest.h"

#include <algorithm>

namespace granary::api {
namespace {

// The longest TrainingJob name whose worker hostnames (<job>-worker-<rank>) stay DNS labels.
constexpr size_t kMaxJobNameLength = 50;

template <typename Resource>
Result<Object> decodeResource(const config::Node& document, bool (*validName)(std::string_view),
                              std::string_view nameRule) {
  Resource resource;
  config::Fields f(document);
  std::string apiVersion, kind;
  f.required("apiVersion", apiVersion);
  f.required("kind", kind);
  if (const config::Node* metadata = f.required("metadata", resource.metadata)) {
    const config::Node* name = metadata->find("name");
    if (!name) {
      f.fail(invalidArgument(metadata->where() + ".name: required field is missing"));
    } else if (!validName(resource.metadata.name)) {
      f.fail(config::expected(*name, nameRule));
    }
  }
  f.required("spec", resource.spec);
  f.allow({"status"});  // written by the operator; ignored on input
  GRANARY_RETURN_IF_ERROR(f.finish());
  return Object(std::move(resource));
}

bool isJobName(std::string_view name) {
  return isDnsLabel(name) && name.size() <= kMaxJobNameLength;
}

bool isManifestFile(const std::filesystem::path& path) {
  const auto extension = path.extension();
  return extension == ".yaml" || extension == ".yml" || extension == ".json";
}

}  // namespace

Result<Object> decodeObject(const config::Node& document) {
  if (!document.isMap()) return config::expected(document, "a Kubernetes object (a map)");
  std::string apiVersion, kind, name;
  if (const auto* v = document.find("apiVersion"); v && v->isScalar()) apiVersion = v->scalar();
  if (const auto* k = document.find("kind"); k && k->isScalar()) kind = k->scalar();
  if (const auto* m = document.find("metadata");
      m && m->find("name") && m->find("name")->isScalar()) {
    name = m->find("name")->scalar();
  }
  if (apiVersion.empty() || kind.empty()) {
    return invalidArgument(document.where() + ": apiVersion and kind are required");
  }
  const bool granaryGroup = apiVersion.rfind("granary.io/", 0) == 0;
  if (granaryGroup && apiVersion != kApiVersion) {
    return invalidArgument(document.find("apiVersion")->where() + ": expected " +
                           std::string(kApiVersion) + ", got " + apiVersion);
  }
  if (granaryGroup && kind == "Dataset") {
    return decodeResource<Dataset>(document, isDnsSubdomain,
                                   "a Dataset name: lower-case letters, digits, '-' and '.'");
  }
  if (granaryGroup && kind == "TrainingJob") {
    return decodeResource<TrainingJob>(
        document, isJobName,
        "a TrainingJob name: at most 50 lower-case letters, digits and '-', starting and ending "
        "with a letter or digit");
  }
  if (granaryGroup) {
    return invalidArgument(document.find("kind")->where() +
                           ": expected Dataset or TrainingJob, got " + kind);
  }
  return Object(OtherObject{apiVersion, kind, name});
}

Result<std::vector<ManifestDocument>> loadManifests(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(path, error)) {
      if (entry.is_regular_file() && isManifestFile(entry.path())) files.push_back(entry.path());
    }
    if (error) return unavailable(path.string() + ": cannot list: " + error.message());
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }

  std::vector<ManifestDocument> documents;
  config::Errors errors;
  for (const auto& file : files) {
    auto nodes = config::loadFile(file);
    if (!nodes.isOk()) {
      if (nodes.status().code() != StatusCode::kInvalidArgument) return nodes.status();
      errors.add(nodes.status());
      continue;
    }
    for (const auto& node : *nodes) {
      auto object = decodeObject(node);
      if (!object.isOk()) {
        errors.add(object.status());
        continue;
      }
      documents.push_back({node.source() + ":" + std::to_string(node.line()), std::move(*object)});
    }
  }
  GRANARY_RETURN_IF_ERROR(errors.status());
  return documents;
}

}  // namespace granary::api
