// Kubernetes label selectors ("app=web,tier!=db,env in (a,b),!canary,gpu") and field selectors
// ("spec.nodeName=n1,status.phase!=Failed"): parsed once, matched against label maps. Pure.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace granary::kube {

struct SelectorRequirement {
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kNotExists };
  std::string key;
  Op op = Op::kEquals;
  std::vector<std::string> values;
};

class LabelSelector {
 public:
  LabelSelector() = default;  // matches everything

  // InvalidArgument naming the part that does not parse.
  static Result<LabelSelector> parse(std::string_view text);
  // Field selectors support only =, == and != (as the API server does).
  static Result<LabelSelector> parseFields(std::string_view text);

  bool matches(const std::map<std::string, std::string>& labels) const;
  bool empty() const { return requirements_.empty(); }
  const std::vector<SelectorRequirement>& requirements() const { return requirements_; }

 private:
  static Result<LabelSelector> parseWith(std::string_view text, bool fields);
  std::vector<SelectorRequirement> requirements_;
};

}  // namespace granary::kube
