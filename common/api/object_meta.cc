#include "common/api/object_meta.h"

#include <algorithm>
#include <cctype>

namespace granary::api {

bool isDnsLabel(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '-'; });
}

bool isDnsSubdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    if (!isDnsLabel(name.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

namespace {

constexpr size_t kMaxAnnotationBytes = 256 << 10;  // the API server's total for one object

bool withinAnnotationLimit(const std::map<std::string, std::string>& annotations) {
  size_t total = 0;
  for (const auto& [key, value] : annotations) total += key.size() + value.size();
  return total <= kMaxAnnotationBytes;
}

// A label value: empty, or at most 63 alphanumerics, '-', '_' and '.', alphanumeric at both ends.
bool isLabelValue(std::string_view value) {
  if (value.empty()) return true;
  const auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  return value.size() <= 63 && alnum(value.front()) && alnum(value.back()) &&
         std::all_of(value.begin(), value.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// A label key: an optional DNS subdomain prefix and '/', then a name that is a valid value.
bool isLabelKey(std::string_view key) {
  const size_t slash = key.find('/');
  const std::string_view name = slash == std::string_view::npos ? key : key.substr(slash + 1);
  if (slash != std::string_view::npos && !isDnsSubdomain(key.substr(0, slash))) return false;
  return !name.empty() && isLabelValue(name);
}

bool validLabels(const std::map<std::string, std::string>& labels) {
  return std::all_of(labels.begin(), labels.end(), [](const auto& label) {
    return isLabelKey(label.first) && isLabelValue(label.second);
  });
}

}  // namespace

Status decodeValue(const config::Node& node, ObjectMeta& out) {
  if (!node.isMap()) return config::expected(node, "a map");
  config::Fields f(node);
  f.optional("name", out.name);
  f.optional("namespace", out.namespace_, isDnsLabel, "a namespace name (RFC 1123 label)");
  f.optional("uid", out.uid);
  f.optional("resourceVersion", out.resourceVersion);
  f.optional("generation", out.generation);
  f.optional("labels", out.labels, validLabels,
             "labels with values of at most 63 letters, digits, '-', '_' or '.' (starting and "
             "ending with a letter or digit) and names of at most 63");
  f.optional("annotations", out.annotations, withinAnnotationLimit,
             "annotations of at most 262144 bytes (256 KiB) in all, keys and values, as the API "
             "server allows");
  for (const auto& [key, value] : node.entries()) f.allow({key});  // the rest is server-owned
  return f.finish();
}

}  // namespace granary::api
