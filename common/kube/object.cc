#include "common/kube/object.h"

#include <cmath>
#include <ctime>

#include "common/log.h"

namespace granary::kube {
namespace {

bool numbersFinite(const Json& value) {
  if (value.is_number()) return std::isfinite(value.as_double());
  if (value.is_array()) {
    for (const Json& item : value.as_array()) {
      if (!numbersFinite(item)) return false;
    }
  }
  if (value.is_object()) {
    for (const auto& [key, item] : value.as_object()) {
      if (!numbersFinite(item)) return false;
    }
  }
  return true;
}

}  // namespace

Result<Json> parseJson(std::string_view text) {
  Json json;
  try {
    json = Json::parse(std::string(text));
  } catch (const std::exception& e) {
    return invalidArgument(std::string("not JSON: ") + e.what());
  }
  if (!numbersFinite(json)) return invalidArgument("not JSON: a number beyond a double's range");
  return json;
}

int64_t generationOf(const Json& object) {
  const Json generation = pathValue(object, "metadata.generation");
  return generation.is_integer() ? generation.as_number().to_int64() : 1;
}

std::string metadataField(const Json& object, const char* field) {
  if (!object.is_object() || !object.has_object_field("metadata")) return {};
  const auto& metadata = object.at("metadata");
  if (!metadata.has_string_field(field)) return {};
  return metadata.at(field).as_string();
}

std::string objectKey(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

std::string objectKey(const Json& object) { return objectKey(namespaceOf(object), nameOf(object)); }

std::pair<std::string, std::string> splitKey(const std::string& key) {
  const auto slash = key.find('/');
  if (slash == std::string::npos) return {"", key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::map<std::string, std::string> stringMap(const Json& object, const char* field) {
  std::map<std::string, std::string> out;
  if (!object.is_object() || !object.has_object_field("metadata")) return out;
  const auto& metadata = object.at("metadata");
  if (!metadata.has_object_field(field)) return out;
  for (const auto& [key, value] : metadata.at(field).as_object()) {
    if (value.is_string()) out.emplace(key, value.as_string());
  }
  return out;
}

std::string metav1Time(std::chrono::system_clock::time_point time) {
  const std::string t = formatTimestamp(time);  // 2026-11-21T13:01:23.123Z
  return t.substr(0, 19) + "Z";
}

std::string metav1MicroTime(std::chrono::system_clock::time_point time) {
  const std::string t = formatTimestamp(time);
  return t.substr(0, t.size() - 1) + "000Z";
}

std::optional<std::chrono::system_clock::time_point> parseMetav1Time(const std::string& text) {
  std::tm tm{};
  if (text.size() < 19 || !strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

void eraseField(Json& object, const std::string& field) {
  if (object.is_object() && object.has_field(field)) object.erase(field);
}

Json pathValue(const Json& object, const std::string& dottedPath) {
  const Json* node = &object;
  size_t start = 0;
  while (start <= dottedPath.size()) {
    const size_t dot = dottedPath.find('.', start);
    const std::string part = dottedPath.substr(start, dot - start);
    if (!node->is_object() || !node->has_field(part)) return Json::null();
    node = &node->at(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return *node;
}

Json projection(const Json& object, std::initializer_list<const char*> dottedPaths) {
  Json kept = Json::object();
  for (const char* field : {"apiVersion", "kind"})
    if (object.has_field(field)) kept[field] = object.at(field);
  for (const std::string path : dottedPaths) {
    const Json* from = &object;
    Json* to = &kept;
    for (size_t start = 0;;) {
      const size_t dot = path.find('.', start);
      const std::string part = path.substr(start, dot - start);
      if (!from->has_field(part)) break;
      from = &from->at(part);
      if (dot == std::string::npos) {
        (*to)[part] = *from;
        break;
      }
      if (!from->is_object()) break;  // the path goes on through an array or a value
      if (!to->has_object_field(part)) (*to)[part] = Json::object();
      to = &(*to)[part];
      start = dot + 1;
    }
  }
  return kept;
}

bool sameJson(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!sameJson(a.at(i), b.at(i))) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.as_object())
      if (!b.has_field(key) || !sameJson(value, b.at(key))) return false;
    return true;
  }
  return a == b;
}

bool changedBesidesStatus(const Json& before, const Json& after) {
  const auto withoutStatus = [](Json object) {
    eraseField(object, "status");
    if (object.has_object_field("metadata")) {
      eraseField(object["metadata"], "resourceVersion");
      eraseField(object["metadata"], "managedFields");
    }
    return object;
  };
  return !sameJson(withoutStatus(before), withoutStatus(after));
}

}  // namespace granary::kube
