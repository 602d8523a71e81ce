#include "common/api/object_meta.h"

#include <algorithm>

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

Status decodeValue(const config::Node& node, ObjectMeta& out) {
  if (!node.isMap()) return config::expected(node, "a map");
  config::Fields f(node);
  f.optional("name", out.name);
  f.optional("namespace", out.namespace_, isDnsLabel, "a namespace name (RFC 1123 label)");
  f.optional("uid", out.uid);
  f.optional("resourceVersion", out.resourceVersion);
  f.optional("generation", out.generation);
  f.optional("labels", out.labels);
  f.optional("annotations", out.annotations);
  for (const auto& [key, value] : node.entries()) f.allow({key});  // the rest is server-owned
  return f.finish();
}

}  // namespace granary::api
