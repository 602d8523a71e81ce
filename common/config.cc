#include "common/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

namespace granary::config {
namespace {

constexpr int kMaxDepth = 64;
constexpr size_t kMaxNodes = 1'000'000;  // bounds alias expansion ("billion laughs")

bool isPlainKey(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-';
  });
}

std::string childPath(const std::string& parent, std::string_view key) {
  std::string path = parent;
  if (isPlainKey(key)) {
    if (!path.empty()) path += '.';
    path += key;
  } else {
    path += "[\"";
    path += key;
    path += "\"]";
  }
  return path;
}

std::string itemPath(const std::string& parent, size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

// "source:line: path", leaving out the parts that are unknown.
std::string formatLocation(const std::string& source, int line, const std::string& path) {
  std::string out = source;
  if (line > 0) out += (out.empty() ? "line " : ":") + std::to_string(line);
  if (!path.empty()) out += (out.empty() ? "" : ": ") + path;
  return out.empty() ? "<document>" : out;
}

const std::string& emptyString() {
  static const std::string empty;
  return empty;
}

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// yaml-cpp 0.7's LoadAll never returns on a stream with a ',' after a flow collection ("[],",
// "{a: b}, c"): its parser starts document after document at the ',' without consuming it, each
// an empty one, and memory grows until the process dies (jbeder/yaml-cpp#1040; fixed after
// 0.8). A first pass over the parser's events finds a document that starts where the one
// before it did.
class DocumentStarts final : public YAML::EventHandler {
 public:
  // The position where a document started a second time; nullopt when every one made progress.
  static std::optional<YAML::Mark> stuckAt(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts starts;
    while (parser.HandleNextDocument(starts)) {
      if (starts.stuck_) return starts.last_;
    }
    return std::nullopt;
  }

  void OnDocumentStart(const YAML::Mark& mark) override {
    stuck_ = started_ && mark.pos == last_.pos;
    started_ = true;
    last_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  bool started_ = false;
  bool stuck_ = false;
  YAML::Mark last_;
};

}  // namespace

// Converts yaml-cpp's tree into Node, enforcing the limits and rejecting duplicate keys.
class NodeBuilder {
 public:
  explicit NodeBuilder(std::shared_ptr<const std::string> source) : source_(std::move(source)) {}

  Result<Node> build(const YAML::Node& yaml) {
    Node root;
    GRANARY_RETURN_IF_ERROR(convert(yaml, "", 0, root));
    return root;
  }

 private:
  Status convert(const YAML::Node& yaml, const std::string& path, int depth, Node& out) {
    out.path_ = path;
    out.source_ = source_;
    out.line_ = yaml.Mark().line >= 0 ? yaml.Mark().line + 1 : 0;
    if (depth > kMaxDepth) return invalidArgument(out.where() + ": nested deeper than 64 levels");
    if (++count_ > kMaxNodes) {
      return invalidArgument(out.where() + ": document has more than 1,000,000 nodes");
    }
    switch (yaml.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out.kind_ = Node::Kind::kNull;
        return Status::ok();
      case YAML::NodeType::Scalar:
        out.kind_ = Node::Kind::kScalar;
        out.scalar_ = yaml.Scalar();
        out.quoted_ = yaml.Tag() == "!";  // yaml-cpp tags quoted scalars "!", plain ones "?"
        return Status::ok();
      case YAML::NodeType::Sequence:
        out.kind_ = Node::Kind::kList;
        out.items_.resize(yaml.size());
        for (size_t i = 0; i < yaml.size(); ++i) {
          GRANARY_RETURN_IF_ERROR(convert(yaml[i], itemPath(path, i), depth + 1, out.items_[i]));
        }
        return Status::ok();
      case YAML::NodeType::Map: {
        out.kind_ = Node::Kind::kMap;
        std::set<std::string> seen;
        for (const auto& entry : yaml) {
          if (!entry.first.IsScalar()) {
            return invalidArgument(out.where() + ": map keys must be plain strings");
          }
          const std::string key = entry.first.Scalar();
          if (!seen.insert(key).second) {
            return invalidArgument(out.where() + ": key \"" + key + "\" appears twice");
          }
          Node value;
          GRANARY_RETURN_IF_ERROR(convert(entry.second, childPath(path, key), depth + 1, value));
          out.entries_.emplace_back(key, std::move(value));
        }
        return Status::ok();
      }
    }
    return internalError("unknown YAML node type");
  }

  std::shared_ptr<const std::string> source_;
  size_t count_ = 0;
};

const Node* Node::find(std::string_view key) const {
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const std::string& Node::source() const { return source_ ? *source_ : emptyString(); }

std::string Node::where() const { return formatLocation(source(), line_, path_); }

std::string Node::describe() const {
  switch (kind_) {
    case Kind::kNull:
      return "null";
    case Kind::kMap:
      return "a map";
    case Kind::kList:
      return "a list";
    case Kind::kScalar:
      break;
  }
  std::string text = scalar_.size() > 60 ? scalar_.substr(0, 57) + "..." : scalar_;
  return quoted_ ? "\"" + text + "\"" : text;
}

Node Node::scalarNode(std::string text, bool quoted) {
  Node node;
  node.kind_ = Kind::kScalar;
  node.scalar_ = std::move(text);
  node.quoted_ = quoted;
  return node;
}

Node Node::mapNode(std::vector<std::pair<std::string, Node>> entries) {
  Node node;
  node.kind_ = Kind::kMap;
  node.entries_ = std::move(entries);
  node.relocate("", nullptr);
  return node;
}

Node Node::listNode(std::vector<Node> items) {
  Node node;
  node.kind_ = Kind::kList;
  node.items_ = std::move(items);
  node.relocate("", nullptr);
  return node;
}

void Node::relocate(const std::string& path, const std::shared_ptr<const std::string>& source) {
  path_ = path;
  source_ = source;
  for (auto& [key, value] : entries_) value.relocate(childPath(path, key), source);
  for (size_t i = 0; i < items_.size(); ++i) items_[i].relocate(itemPath(path, i), source);
}

Result<std::vector<Node>> parseAll(std::string_view text, std::string_view source) {
  auto shared = std::make_shared<const std::string>(source);
  std::vector<YAML::Node> documents;
  const std::string copy(text);
  try {
    if (const auto stuck = DocumentStarts::stuckAt(copy)) {
      const size_t at = static_cast<size_t>(stuck->pos);
      const char c = at < copy.size() ? copy[at] : ' ';
      return invalidArgument(std::string(source) + ":" + std::to_string(stuck->line + 1) +
                             ": not valid YAML or JSON: unexpected " +
                             (std::isgraph(static_cast<unsigned char>(c))
                                  ? "'" + std::string(1, c) + "'"
                                  : std::string("text")) +
                             " after the document");
    }
    documents = YAML::LoadAll(copy);
  } catch (const YAML::Exception& e) {
    const std::string location =
        std::string(source) + (e.mark.line >= 0 ? ":" + std::to_string(e.mark.line + 1) : "");
    return invalidArgument(location + ": not valid YAML or JSON: " + e.msg);
  }
  std::vector<Node> nodes;
  for (const auto& document : documents) {
    if (document.IsNull()) continue;
    GRANARY_ASSIGN_OR_RETURN(Node node, NodeBuilder(shared).build(document));
    nodes.push_back(std::move(node));
  }
  return nodes;
}

Result<Node> parse(std::string_view text, std::string_view source) {
  GRANARY_ASSIGN_OR_RETURN(auto documents, parseAll(text, source));
  if (documents.size() > 1) {
    return invalidArgument(std::string(source) + ": expected one document, found " +
                           std::to_string(documents.size()));
  }
  if (documents.empty()) return Node{};
  return std::move(documents.front());
}

Result<std::vector<Node>> loadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return notFound(path.string() + ": cannot be read (missing file or no permission)");
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (!error && size > static_cast<uintmax_t>(kMaxFileBytes)) {
    return invalidArgument(path.string() + ": " + std::to_string(size) +
                           " bytes; a manifest file may hold at most " +
                           std::to_string(kMaxFileBytes) + " (4 MiB): split it into several files");
  }
  std::ostringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  if (content.size() > static_cast<size_t>(kMaxFileBytes))  // not a regular file (a pipe)
    return invalidArgument(path.string() + ": more than " + std::to_string(kMaxFileBytes) +
                           " bytes (4 MiB); split it into several files");
  // Documents are counted by their separators before anything is parsed.
  int64_t separators = content.starts_with("---") ? 1 : 0;
  for (size_t at = content.find("\n---"); at != std::string::npos;
       at = content.find("\n---", at + 4))
    ++separators;
  if (separators > kMaxDocuments) {
    return invalidArgument(path.string() + ": " + std::to_string(separators) +
                           " documents; a manifest file may hold at most " +
                           std::to_string(kMaxDocuments) + ": split it into several files");
  }
  return parseAll(content, path.string());
}

Status expected(const Node& node, std::string_view what) {
  return invalidArgument(node.where() + ": expected " + std::string(what) + ", got " +
                         node.describe());
}

Status decodeValue(const Node& node, std::string& out) {
  if (!node.isScalar()) return expected(node, "a string");
  out = node.scalar();
  return Status::ok();
}

Status decodeValue(const Node& node, bool& out) {
  if (node.isScalar() && !node.quoted()) {
    if (node.scalar() == "true") return out = true, Status::ok();
    if (node.scalar() == "false") return out = false, Status::ok();
  }
  return expected(node, "true or false");
}

namespace {

template <typename Int>
Status decodeInteger(const Node& node, Int& out) {
  if (node.isScalar() && !node.quoted()) {
    const std::string& text = node.scalar();
    Int value{};
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size()) {
      out = value;
      return Status::ok();
    }
    if (error == std::errc::result_out_of_range) {
      return expected(node, "an integer of at most " + std::to_string(sizeof(Int) * 8) + " bits");
    }
  }
  return expected(node, "an integer");
}

}  // namespace

Status decodeValue(const Node& node, int64_t& out) { return decodeInteger(node, out); }
Status decodeValue(const Node& node, int32_t& out) { return decodeInteger(node, out); }

Status decodeValue(const Node& node, double& out) {
  if (node.isScalar() && !node.quoted()) {
    const std::string& text = node.scalar();
    double value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size()) {
      out = value;
      return Status::ok();
    }
  }
  return expected(node, "a number");
}

Status decodeValue(const Node& node, ByteSize& out) {
  if (node.isScalar()) {
    if (auto size = parseByteSize(node.scalar()); size.isOk()) {
      out = *size;
      return Status::ok();
    }
  }
  return expected(node, "a byte quantity such as 1073741824, 500Mi or 2Ti");
}

Status decodeValue(const Node& node, std::chrono::nanoseconds& out) {
  if (node.isScalar()) {
    if (auto duration = parseDuration(node.scalar()); duration.isOk()) {
      out = *duration;
      return Status::ok();
    }
  }
  return expected(node, "a duration such as 250ms, 30s or 5m");
}

Status decodeValue(const Node& node, Node& out) {
  out = node;
  return Status::ok();
}

void Errors::add(const Status& status) {
  if (!status.isOk()) messages_.push_back(status.message());
}

Status Errors::status() const {
  if (messages_.empty()) return Status::ok();
  std::string joined;
  for (const auto& message : messages_) {
    if (!joined.empty()) joined += "\n";
    joined += message;
  }
  return invalidArgument(std::move(joined));
}

Fields::Fields(const Node& node) : node_(node) {
  if (!node.isMap() && !node.isNull()) errors_.add(expected(node, "a map"));
}

const Node* Fields::lookup(std::string_view key) {
  known_.emplace_back(key);
  const Node* value = node_.find(key);
  return value && !value->isNull() ? value : nullptr;
}

void Fields::missing(std::string_view key) {
  if (!node_.isMap() && !node_.isNull()) return;  // the shape error already says enough
  const std::string location =
      formatLocation(node_.source(), node_.line(), childPath(node_.path(), key));
  errors_.add(invalidArgument(location + ": required field is missing"));
}

void Fields::allow(std::initializer_list<std::string_view> keys) {
  for (auto key : keys)
    if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
}

Status Fields::finish() {
  for (const auto& [key, value] : node_.entries()) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    std::string message = value.where() + ": unknown field";
    const std::string* closest = nullptr;
    size_t best = 3;  // suggest only near misses
    for (const auto& candidate : known_) {
      const size_t distance = editDistance(key, candidate);
      if (distance < best) best = distance, closest = &candidate;
    }
    if (closest) {
      message += "; did you mean \"" + *closest + "\"?";
    } else if (!known_.empty()) {
      message += "; known fields are ";
      for (size_t i = 0; i < known_.size(); ++i) message += (i ? ", " : "") + known_[i];
    }
    errors_.add(invalidArgument(message));
  }
  return errors_.status();
}

}  // namespace granary::config
