#include "common/cluster/node_checks.h"

#include <algorithm>
#include <charconv>

namespace granary::cluster {
namespace {

bool parseInt(const std::string& text, int64_t& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

bool matchesRequirement(const api::NodeSelectorRequirement& r, const std::string* value) {
  const auto contains = [&](const std::string& v) {
    return std::find(r.values.begin(), r.values.end(), v) != r.values.end();
  };
  if (r.op == "In") return value && contains(*value);
  if (r.op == "NotIn") return !value || !contains(*value);
  if (r.op == "Exists") return value != nullptr;
  if (r.op == "DoesNotExist") return value == nullptr;
  if (r.op == "Gt" || r.op == "Lt") {
    int64_t have = 0, bound = 0;
    if (!value || r.values.size() != 1 || !parseInt(*value, have) ||
        !parseInt(r.values[0], bound)) {
      return false;
    }
    return r.op == "Gt" ? have > bound : have < bound;
  }
  return false;
}

}  // namespace

std::string checkNodeCondition(const NodeInfo& node) {
  if (!node.ready) return "node(s) were not ready";
  if (node.unschedulable) return "node(s) were unschedulable";
  return "";
}

bool tolerates(const api::Toleration& t, const Taint& taint) {
  if (!t.effect.empty() && t.effect != taint.effect) return false;
  if (t.key.empty()) return t.op == "Exists";  // an empty key with Exists tolerates everything
  if (t.key != taint.key) return false;
  return t.op == "Exists" || t.value == taint.value;
}

std::string checkTaints(const NodeInfo& node, const PodInfo& pod) {
  for (const auto& taint : node.taints) {
    if (taint.effect == "PreferNoSchedule") continue;
    const bool tolerated =
        std::any_of(pod.tolerations.begin(), pod.tolerations.end(),
                    [&](const api::Toleration& t) { return tolerates(t, taint); });
    if (!tolerated) {
      return "node(s) had untolerated taint {" + taint.key +
             (taint.value.empty() ? "" : ": " + taint.value) + "}";
    }
  }
  return "";
}

bool matchesTerm(const api::NodeSelectorTerm& term, const NodeInfo& node) {
  if (term.matchExpressions.empty() && term.matchFields.empty()) return false;  // as Kubernetes
  for (const auto& r : term.matchExpressions) {
    const auto it = node.labels.find(r.key);
    if (!matchesRequirement(r, it == node.labels.end() ? nullptr : &it->second)) return false;
  }
  for (const auto& r : term.matchFields) {
    if (r.key != "metadata.name" || !matchesRequirement(r, &node.name)) return false;
  }
  return true;
}

std::string checkAffinity(const NodeInfo& node, const PodInfo& pod) {
  for (const auto& [key, value] : pod.nodeSelector) {
    const auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) {
      return "node(s) didn't match Pod's node affinity/selector";
    }
  }
  if (!pod.requiredTerms.empty() &&
      std::none_of(pod.requiredTerms.begin(), pod.requiredTerms.end(),
                   [&](const api::NodeSelectorTerm& term) { return matchesTerm(term, node); })) {
    return "node(s) didn't match Pod's node affinity/selector";
  }
  return "";
}

std::string checkResources(const NodeInfo& node, const PodInfo& pod, const Resources& extra) {
  Resources free = node.free();
  free -= extra;
  return shortfall(pod.requests, free);
}

std::string checkStatic(const NodeInfo& node, const PodInfo& pod) {
  if (auto reason = checkNodeCondition(node); !reason.empty()) return reason;
  if (auto reason = checkTaints(node, pod); !reason.empty()) return reason;
  return checkAffinity(node, pod);
}

bool PodInfo::sameRequirements(const PodInfo& other) const {
  const auto sameTolerations = [](const api::Toleration& a, const api::Toleration& b) {
    return a.key == b.key && a.op == b.op && a.value == b.value && a.effect == b.effect;
  };
  const auto sameRequirement = [](const api::NodeSelectorRequirement& a,
                                  const api::NodeSelectorRequirement& b) {
    return a.key == b.key && a.op == b.op && a.values == b.values;
  };
  const auto sameTerm = [&](const api::NodeSelectorTerm& a, const api::NodeSelectorTerm& b) {
    return std::equal(a.matchExpressions.begin(), a.matchExpressions.end(),
                      b.matchExpressions.begin(), b.matchExpressions.end(), sameRequirement) &&
           std::equal(a.matchFields.begin(), a.matchFields.end(), b.matchFields.begin(),
                      b.matchFields.end(), sameRequirement);
  };
  return requests == other.requests && nodeSelector == other.nodeSelector &&
         std::equal(tolerations.begin(), tolerations.end(), other.tolerations.begin(),
                    other.tolerations.end(), sameTolerations) &&
         std::equal(requiredTerms.begin(), requiredTerms.end(), other.requiredTerms.begin(),
                    other.requiredTerms.end(), sameTerm);
}

}  // namespace granary::cluster
