// Kubernetes scheduling constraints as plain structs (core/v1 Toleration and NodeAffinity),
// shared by Dataset cache placement, TrainingJob workers and the scheduler.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/config.h"

namespace granary::api {

struct Toleration {
  std::string key;
  std::string op = "Equal";  // Exists | Equal
  std::string value;
  std::string effect;  // "" (all) | NoSchedule | PreferNoSchedule | NoExecute
  std::optional<int64_t> tolerationSeconds;
};

struct NodeSelectorRequirement {
  std::string key;
  std::string op;  // In | NotIn | Exists | DoesNotExist | Gt | Lt
  std::vector<std::string> values;
};

struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> matchExpressions;
  std::vector<NodeSelectorRequirement> matchFields;
};

struct PreferredSchedulingTerm {
  int32_t weight = 1;  // 1..100
  NodeSelectorTerm preference;
};

struct NodeAffinity {
  // requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms (ORed)
  std::vector<NodeSelectorTerm> required;
  // preferredDuringSchedulingIgnoredDuringExecution
  std::vector<PreferredSchedulingTerm> preferred;
};

Status decodeValue(const config::Node& node, Toleration& out);
Status decodeValue(const config::Node& node, NodeSelectorRequirement& out);
Status decodeValue(const config::Node& node, NodeSelectorTerm& out);
Status decodeValue(const config::Node& node, PreferredSchedulingTerm& out);
Status decodeValue(const config::Node& node, NodeAffinity& out);

}  // namespace granary::api
