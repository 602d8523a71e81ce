// Config loading: YAML or JSON (JSON is read as the YAML 1.2 subset it is) into plain
// structs, with errors that name the file, line, field and the value expected:
//
//   job.yaml:14: spec.cache.replicas: expected an integer from 1 to 16, got "0"
//
// Documents become a config::Node tree (yaml-cpp stays inside config.cc). Structs are
// decoded by overloads of decodeValue(const Node&, T&), found by argument-dependent lookup;
// a struct's overload reads its map with Fields, which also rejects unknown fields:
//
//   Status decodeValue(const config::Node& node, CacheOptions& out) {
//     config::Fields f(node);
//     f.required("directory", out.directory);
//     f.optional("replicas", out.replicas, [](int64_t r) { return r >= 1; }, "an integer >= 1");
//     return f.finish();
//   }
//
// Null values (`key:` or `key: null`) count as absent, as in Kubernetes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/quantity.h"
#include "common/result.h"

namespace granary::config {

class Node {
 public:
  enum class Kind { kNull, kScalar, kMap, kList };

  Node() = default;

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::kNull; }
  bool isScalar() const { return kind_ == Kind::kScalar; }
  bool isMap() const { return kind_ == Kind::kMap; }
  bool isList() const { return kind_ == Kind::kList; }

  // Scalar text; `quoted` is true when it was written in quotes (a string, never a number).
  const std::string& scalar() const { return scalar_; }
  bool quoted() const { return quoted_; }
  // Map entries in document order.
  const std::vector<std::pair<std::string, Node>>& entries() const { return entries_; }
  const std::vector<Node>& items() const { return items_; }
  // The value of `key` in a map; null when absent or when this is not a map.
  const Node* find(std::string_view key) const;

  // Where this node is: the field path ("spec.mounts[1].uri"; "" for the root), the
  // source (a file name) and the 1-based line (0 when unknown).
  const std::string& path() const { return path_; }
  const std::string& source() const;
  int line() const { return line_; }
  // "source:line: path" (parts that are unknown are left out), for error messages.
  std::string where() const;
  // The value as written, shortened, for "got ..." in error messages.
  std::string describe() const;

  // Builders for tests and for code that assembles documents.
  static Node scalarNode(std::string text, bool quoted = false);
  static Node mapNode(std::vector<std::pair<std::string, Node>> entries);
  static Node listNode(std::vector<Node> items);

 private:
  friend class NodeBuilder;
  void relocate(const std::string& path, const std::shared_ptr<const std::string>& source);

  Kind kind_ = Kind::kNull;
  std::string scalar_;
  bool quoted_ = false;
  std::vector<std::pair<std::string, Node>> entries_;
  std::vector<Node> items_;
  std::string path_;
  std::shared_ptr<const std::string> source_;
  int line_ = 0;
};

// Parses one YAML or JSON document. InvalidArgument on syntax errors (with the line),
// duplicate keys, more than one document, nesting deeper than 64 levels, or more than
// 1,000,000 nodes once aliases are expanded.
Result<Node> parse(std::string_view text, std::string_view source);
// Parses a stream of `---`-separated documents, skipping empty ones.
Result<std::vector<Node>> parseAll(std::string_view text, std::string_view source);
// What loadFile reads at most, refused before it is parsed: a manifest holds objects for the API
// server, which takes at most 3 MiB a request.
inline constexpr int64_t kMaxFileBytes = int64_t{4} << 20;
inline constexpr int64_t kMaxDocuments = 1000;  // per file

// Reads and parses a file (all documents). NotFound when it cannot be read; InvalidArgument,
// naming the limit, for a file over kMaxFileBytes or kMaxDocuments.
Result<std::vector<Node>> loadFile(const std::filesystem::path& path);

// InvalidArgument "<where>: expected <expected>, got <value>".
Status expected(const Node& node, std::string_view expected);

// Decoders for the building blocks. Numbers and booleans must be unquoted scalars.
Status decodeValue(const Node& node, std::string& out);
Status decodeValue(const Node& node, bool& out);
Status decodeValue(const Node& node, int64_t& out);
Status decodeValue(const Node& node, int32_t& out);
Status decodeValue(const Node& node, double& out);
// A whole number of bytes or a quantity string ("500Gi").
Status decodeValue(const Node& node, ByteSize& out);
// A duration string ("30s", "1h30m").
Status decodeValue(const Node& node, std::chrono::nanoseconds& out);
// Any node, kept as it is (for embedded objects decoded elsewhere).
Status decodeValue(const Node& node, Node& out);

// Collects the messages of several failed decodes into one InvalidArgument.
class Errors {
 public:
  void add(const Status& status);
  bool empty() const { return messages_.empty(); }
  Status status() const;  // OK when nothing was added; one message per line

 private:
  std::vector<std::string> messages_;
};

template <typename T>
Status decodeValue(const Node& node, std::vector<T>& out) {
  if (!node.isList()) return expected(node, "a list");
  out.clear();
  Errors errors;
  for (const Node& item : node.items()) {
    T value{};
    errors.add(decodeValue(item, value));
    out.push_back(std::move(value));
  }
  return errors.status();
}

template <typename T>
Status decodeValue(const Node& node, std::map<std::string, T>& out) {
  if (!node.isMap()) return expected(node, "a map");
  out.clear();
  Errors errors;
  for (const auto& [key, value] : node.entries()) {
    T decoded{};
    errors.add(decodeValue(value, decoded));
    out.emplace(key, std::move(decoded));
  }
  return errors.status();
}

// Declared after the list and map decoders so that optional lists and maps resolve.
template <typename T>
Status decodeValue(const Node& node, std::optional<T>& out) {
  T value{};
  GRANARY_RETURN_IF_ERROR(decodeValue(node, value));
  out = std::move(value);
  return Status::ok();
}

// Decodes a scalar that must be one of `names`; the error lists them.
template <typename E>
Status decodeEnum(const Node& node, E& out,
                  std::initializer_list<std::pair<std::string_view, E>> names) {
  std::string choices;
  for (const auto& [name, value] : names) {
    if (node.isScalar() && node.scalar() == name) {
      out = value;
      return Status::ok();
    }
    choices += choices.empty() ? "" : ", ";
    choices += name;
  }
  return expected(node, "one of " + choices);
}

// Reads the fields of one map. Each call records the field as known; finish() reports every
// error met, plus fields that were never asked for (with a suggestion for likely typos).
class Fields {
 public:
  explicit Fields(const Node& node);

  template <typename T>
  const Node* optional(std::string_view key, T& out) {
    const Node* value = lookup(key);
    if (value) errors_.add(decodeValue(*value, out));
    return value;
  }

  // As optional(); then `valid(out)` must hold, or the error says `expectation`.
  template <typename T, typename Check>
  const Node* optional(std::string_view key, T& out, Check valid, std::string_view expectation) {
    const Node* value = lookup(key);
    if (!value) return nullptr;
    Status status = decodeValue(*value, out);
    if (status.isOk() && !valid(out)) status = expected(*value, expectation);
    errors_.add(status);
    return value;
  }

  template <typename T>
  const Node* required(std::string_view key, T& out) {
    const Node* value = optional(key, out);
    if (!value) missing(key);
    return value;
  }

  template <typename T, typename Check>
  const Node* required(std::string_view key, T& out, Check valid, std::string_view expectation) {
    const Node* value = optional(key, out, valid, expectation);
    if (!value) missing(key);
    return value;
  }

  // Marks fields as known without decoding them (read elsewhere, or ignored on purpose).
  void allow(std::initializer_list<std::string_view> keys);

  // Records an error found while checking fields against each other.
  void fail(const Status& status) { errors_.add(status); }

  Status finish();

 private:
  const Node* lookup(std::string_view key);
  void missing(std::string_view key);

  const Node& node_;
  std::vector<std::string> known_;
  Errors errors_;
};

// Parses a file that holds exactly one document and decodes it into T.
template <typename T>
Result<T> decodeFile(const std::filesystem::path& path) {
  GRANARY_ASSIGN_OR_RETURN(auto documents, loadFile(path));
  if (documents.size() != 1) {
    return invalidArgument(path.string() + ": expected exactly one document, found " +
                           std::to_string(documents.size()));
  }
  T value{};
  GRANARY_RETURN_IF_ERROR(decodeValue(documents.front(), value));
  return value;
}

}  // namespace granary::config
