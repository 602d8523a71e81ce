#include "common/kube/yaml_json.h"

#include <charconv>
#include <cstdio>
#include <regex>

namespace granary::kube {
namespace {

Json scalarToJson(const config::Node& node) {
  const std::string& text = node.scalar();
  if (node.quoted()) return Json::string(text);
  if (text == "true" || text == "True" || text == "TRUE") return Json::boolean(true);
  if (text == "false" || text == "False" || text == "FALSE") return Json::boolean(false);
  if (text.empty() || text == "null" || text == "Null" || text == "NULL" || text == "~") {
    return Json::null();
  }
  static const std::regex kInteger("[-+]?[0-9]+");
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  if (std::regex_match(text, kInteger)) {
    int64_t value = 0;
    const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
    const auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size()) return Json::number(value);
  }
  if (std::regex_match(text, kFloat)) return Json::number(std::stod(text));
  return Json::string(text);
}

}  // namespace

Json toJson(const config::Node& node) {
  switch (node.kind()) {
    case config::Node::Kind::kNull:
      return Json::null();
    case config::Node::Kind::kScalar:
      return scalarToJson(node);
    case config::Node::Kind::kList: {
      Json array = Json::array(node.items().size());
      for (size_t i = 0; i < node.items().size(); ++i) array[i] = toJson(node.items()[i]);
      return array;
    }
    case config::Node::Kind::kMap: {
      Json object = Json::object();
      for (const auto& [key, value] : node.entries()) object[key] = toJson(value);
      return object;
    }
  }
  return Json::null();
}

config::Node toConfig(const Json& json) {
  if (json.is_string()) return config::Node::scalarNode(json.as_string(), true);
  if (json.is_boolean()) return config::Node::scalarNode(json.as_bool() ? "true" : "false");
  if (json.is_integer())
    return config::Node::scalarNode(std::to_string(json.as_number().to_int64()));
  if (json.is_number()) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", json.as_double());
    return config::Node::scalarNode(text);
  }
  if (json.is_array()) {
    std::vector<config::Node> items;
    for (const auto& item : json.as_array()) items.push_back(toConfig(item));
    return config::Node::listNode(std::move(items));
  }
  if (json.is_object()) {
    std::vector<std::pair<std::string, config::Node>> entries;
    for (const auto& [key, value] : json.as_object()) entries.emplace_back(key, toConfig(value));
    return config::Node::mapNode(std::move(entries));
  }
  return config::Node();
}

}  // namespace granary::kube
