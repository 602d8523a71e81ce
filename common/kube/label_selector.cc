#include "common/kube/label_selector.h"

#include <algorithm>
#include <cctype>

namespace granary::kube {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Splits on commas that are not inside parentheses.
std::vector<std::string_view> splitTerms(std::string_view text) {
  std::vector<std::string_view> terms;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      terms.push_back(trim(text.substr(start, i - start)));
      start = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      --depth;
    }
  }
  return terms;
}

bool validKey(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

Status bad(std::string_view text, std::string_view term) {
  return invalidArgument("selector \"" + std::string(text) + "\": cannot parse \"" +
                         std::string(term) + "\"; use key=value, key!=value, key in (a,b), " +
                         "key notin (a,b), key or !key");
}

Result<SelectorRequirement> parseTerm(std::string_view text, std::string_view term, bool fields) {
  SelectorRequirement r;
  if (!fields && term.front() == '!') {
    r.key = trim(term.substr(1));
    r.op = SelectorRequirement::Op::kNotExists;
    if (!validKey(r.key)) return bad(text, term);
    return r;
  }
  for (auto [token, op] : {std::pair{std::string_view(" notin "), SelectorRequirement::Op::kNotIn},
                           std::pair{std::string_view(" in "), SelectorRequirement::Op::kIn}}) {
    const size_t at = term.find(token);
    if (fields || at == std::string_view::npos) continue;
    r.key = trim(term.substr(0, at));
    r.op = op;
    std::string_view rest = trim(term.substr(at + token.size()));
    if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')' || !validKey(r.key)) {
      return bad(text, term);
    }
    rest = rest.substr(1, rest.size() - 2);
    size_t start = 0;
    for (size_t i = 0; i <= rest.size(); ++i) {
      if (i == rest.size() || rest[i] == ',') {
        r.values.emplace_back(trim(rest.substr(start, i - start)));
        start = i + 1;
      }
    }
    return r;
  }
  size_t at = term.find("!=");
  if (at != std::string_view::npos) {
    r.op = SelectorRequirement::Op::kNotEquals;
    r.key = trim(term.substr(0, at));
    r.values.emplace_back(trim(term.substr(at + 2)));
  } else if ((at = term.find("==")) != std::string_view::npos) {
    r.key = trim(term.substr(0, at));
    r.values.emplace_back(trim(term.substr(at + 2)));
  } else if ((at = term.find('=')) != std::string_view::npos) {
    r.key = trim(term.substr(0, at));
    r.values.emplace_back(trim(term.substr(at + 1)));
  } else if (!fields) {
    r.key = term;
    r.op = SelectorRequirement::Op::kExists;
  } else {
    return bad(text, term);
  }
  if (!validKey(r.key)) return bad(text, term);
  return r;
}

}  // namespace

Result<LabelSelector> LabelSelector::parse(std::string_view text) { return parseWith(text, false); }

Result<LabelSelector> LabelSelector::parseFields(std::string_view text) {
  return parseWith(text, true);
}

Result<LabelSelector> LabelSelector::parseWith(std::string_view text, bool fields) {
  LabelSelector selector;
  text = trim(text);
  if (text.empty()) return selector;
  for (std::string_view term : splitTerms(text)) {
    if (term.empty()) return bad(text, term);
    GRANARY_ASSIGN_OR_RETURN(auto requirement, parseTerm(text, term, fields));
    selector.requirements_.push_back(std::move(requirement));
  }
  return selector;
}

bool LabelSelector::matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& r : requirements_) {
    const auto it = labels.find(r.key);
    const bool present = it != labels.end();
    const auto contains = [&](const std::string& v) {
      return std::find(r.values.begin(), r.values.end(), v) != r.values.end();
    };
    switch (r.op) {
      case SelectorRequirement::Op::kEquals:
        if (!present || it->second != r.values[0]) return false;
        break;
      case SelectorRequirement::Op::kNotEquals:
        if (present && it->second == r.values[0]) return false;
        break;
      case SelectorRequirement::Op::kIn:
        if (!present || !contains(it->second)) return false;
        break;
      case SelectorRequirement::Op::kNotIn:
        if (present && contains(it->second)) return false;
        break;
      case SelectorRequirement::Op::kExists:
        if (!present) return false;
        break;
      case SelectorRequirement::Op::kNotExists:
        if (present) return false;
        break;
    }
  }
  return true;
}

}  // namespace granary::kube
