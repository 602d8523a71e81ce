#include "common/api/scheduling.h"

namespace granary::api {
namespace {

bool oneOf(std::string_view value, std::initializer_list<std::string_view> choices) {
  for (auto choice : choices) {
    if (value == choice) return true;
  }
  return false;
}

}  // namespace

Status decodeValue(const config::Node& node, Toleration& out) {
  config::Fields f(node);
  f.optional("key", out.key);
  f.optional(
      "operator", out.op,
      [](const std::string& v) {
        return oneOf(v, {"Exists", "Equal"});
      },
      "one of Exists, Equal");
  f.optional("value", out.value);
  f.optional(
      "effect", out.effect,
      [](const std::string& v) {
        return oneOf(v, {"", "NoSchedule", "PreferNoSchedule", "NoExecute"});
      },
      "one of NoSchedule, PreferNoSchedule, NoExecute");
  f.optional("tolerationSeconds", out.tolerationSeconds);
  if (out.op == "Exists" && !out.value.empty()) {
    f.fail(config::expected(*node.find("value"), "no value when operator is Exists"));
  }
  return f.finish();
}

Status decodeValue(const config::Node& node, NodeSelectorRequirement& out) {
  config::Fields f(node);
  f.required("key", out.key);
  f.required(
      "operator", out.op,
      [](const std::string& v) {
        return oneOf(v, {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"});
      },
      "one of In, NotIn, Exists, DoesNotExist, Gt, Lt");
  const config::Node* values = f.optional("values", out.values);
  const bool needsValues = oneOf(out.op, {"In", "NotIn", "Gt", "Lt"});
  if (needsValues && out.values.empty()) {
    f.fail(invalidArgument(node.where() + ".values: operator " + out.op +
                           " needs at least one value"));
  } else if (!needsValues && values && !out.values.empty()) {
    f.fail(config::expected(*values, "no values when operator is " + out.op));
  }
  return f.finish();
}

Status decodeValue(const config::Node& node, NodeSelectorTerm& out) {
  config::Fields f(node);
  f.optional("matchExpressions", out.matchExpressions);
  f.optional("matchFields", out.matchFields);
  return f.finish();
}

Status decodeValue(const config::Node& node, PreferredSchedulingTerm& out) {
  config::Fields f(node);
  f.required(
      "weight", out.weight, [](int32_t w) { return w >= 1 && w <= 100; },
      "an integer from 1 to 100");
  f.required("preference", out.preference);
  return f.finish();
}

Status decodeValue(const config::Node& node, NodeAffinity& out) {
  config::Fields f(node);
  if (const config::Node* required = node.find("requiredDuringSchedulingIgnoredDuringExecution")) {
    config::Fields r(*required);
    r.required("nodeSelectorTerms", out.required);
    f.fail(r.finish());
  }
  f.allow({"requiredDuringSchedulingIgnoredDuringExecution"});
  f.optional("preferredDuringSchedulingIgnoredDuringExecution", out.preferred);
  return f.finish();
}

}  // namespace granary::api
