#include "operator/core/conditions.h"

namespace granary::op {

using kube::Json;

void setCondition(Json& conditions, const Condition& condition, int64_t observedGeneration,
                  std::chrono::system_clock::time_point now) {
  if (!conditions.is_array()) conditions = Json::array();
  const std::string status = condition.status ? "True" : "False";
  Json* existing = nullptr;
  for (auto& c : conditions.as_array())
    if (c.has_string_field("type") && c.at("type").as_string() == condition.type) existing = &c;
  std::string transition = kube::metav1Time(now);
  if (existing && existing->has_string_field("status") &&
      existing->at("status").as_string() == status &&
      existing->has_string_field("lastTransitionTime"))
    transition = existing->at("lastTransitionTime").as_string();
  Json value = Json::object();
  value["type"] = Json::string(condition.type);
  value["status"] = Json::string(status);
  value["observedGeneration"] = Json::number(observedGeneration);
  value["lastTransitionTime"] = Json::string(transition);
  value["reason"] = Json::string(condition.reason);
  value["message"] = Json::string(condition.message);
  if (existing) {
    *existing = std::move(value);
  } else {
    conditions[conditions.size()] = std::move(value);
  }
}

Condition conditionOf(const Json& status, const std::string& type) {
  const Json conditions = kube::pathValue(status, "conditions");
  if (conditions.is_array()) {
    for (const auto& c : conditions.as_array()) {
      if (!c.has_string_field("type") || c.at("type").as_string() != type) continue;
      const auto text = [&](const char* field) {
        return c.has_string_field(field) ? c.at(field).as_string() : std::string();
      };
      return {type, text("status") == "True", text("reason"), text("message")};
    }
  }
  return {type, false, "Unknown", ""};
}

}  // namespace granary::op
