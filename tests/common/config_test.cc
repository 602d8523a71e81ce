#include "common/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace granary {
namespace {

using config::Fields;
using config::Node;

enum class Policy { kPin, kLru };

struct Directory {
  std::string path;
  ByteSize quota;
};

struct Options {
  std::string listen = "0.0.0.0:7400";
  int64_t replicas = 1;
  bool verbose = false;
  double ratio = 0.5;
  Policy policy = Policy::kPin;
  std::chrono::nanoseconds timeout = std::chrono::seconds(30);
  std::vector<Directory> directories;
  std::map<std::string, std::string> labels;
  std::optional<ByteSize> bandwidth;
};

Status decodeValue(const Node& node, Policy& out) {
  return config::decodeEnum(node, out, {{"Pin", Policy::kPin}, {"LRU", Policy::kLru}});
}

Status decodeValue(const Node& node, Directory& out) {
  Fields f(node);
  f.required("path", out.path);
  f.required("quota", out.quota);
  return f.finish();
}

Status decodeValue(const Node& node, Options& out) {
  Fields f(node);
  f.optional("listen", out.listen);
  f.optional(
      "replicas", out.replicas, [](int64_t r) { return r >= 1 && r <= 16; },
      "an integer from 1 to 16");
  f.optional("verbose", out.verbose);
  f.optional("ratio", out.ratio);
  f.optional("policy", out.policy);
  f.optional("timeout", out.timeout);
  f.required("directories", out.directories);
  f.optional("labels", out.labels);
  f.optional("bandwidth", out.bandwidth);
  return f.finish();
}

Result<Options> decode(std::string_view text) {
  GRANARY_ASSIGN_OR_RETURN(Node node, config::parse(text, "options.yaml"));
  Options options;
  GRANARY_RETURN_IF_ERROR(decodeValue(node, options));
  return options;
}

std::string errorOf(std::string_view text) {
  auto result = decode(text);
  EXPECT_FALSE(result.isOk()) << text;
  return result.status().message();
}

TEST(Config, DecodesEveryKindOfField) {
  auto options = decode(R"(
listen: 127.0.0.1:9000
replicas: 3
verbose: true
ratio: 0.75
policy: LRU
timeout: 1m30s
directories:
  - {path: /mnt/nvme0, quota: 500Gi}
  - path: /mnt/nvme1
    quota: 1099511627776
labels:
  granary.io/role: cache
bandwidth: 100M
)");
  ASSERT_TRUE(options.isOk()) << options.status();
  EXPECT_EQ(options->listen, "127.0.0.1:9000");
  EXPECT_EQ(options->replicas, 3);
  EXPECT_TRUE(options->verbose);
  EXPECT_DOUBLE_EQ(options->ratio, 0.75);
  EXPECT_EQ(options->policy, Policy::kLru);
  EXPECT_EQ(options->timeout, std::chrono::seconds(90));
  ASSERT_EQ(options->directories.size(), 2u);
  EXPECT_EQ(options->directories[0].quota.bytes, 500LL << 30);
  EXPECT_EQ(options->directories[1].path, "/mnt/nvme1");
  EXPECT_EQ(options->labels.at("granary.io/role"), "cache");
  ASSERT_TRUE(options->bandwidth.has_value());
  EXPECT_EQ(options->bandwidth->bytes, 100'000'000);
}

TEST(Config, DefaultsStayWhenFieldsAreAbsentOrNull) {
  auto options = decode("directories: []\nreplicas: null\nlisten:\n");
  ASSERT_TRUE(options.isOk()) << options.status();
  EXPECT_EQ(options->listen, "0.0.0.0:7400");
  EXPECT_EQ(options->replicas, 1);
  EXPECT_FALSE(options->bandwidth.has_value());
}

TEST(Config, JsonIsAccepted) {
  auto options = decode(
      R"({"replicas": 2, "policy": "Pin", "directories": [{"path": "/c", "quota": "1Gi"}]})");
  ASSERT_TRUE(options.isOk()) << options.status();
  EXPECT_EQ(options->replicas, 2);
  EXPECT_EQ(options->directories.at(0).quota.bytes, 1LL << 30);
}

TEST(Config, ErrorsNameFileLineFieldAndExpectation) {
  EXPECT_EQ(errorOf("directories: []\nreplicas: 0\n"),
            "options.yaml:2: replicas: expected an integer from 1 to 16, got 0");
  EXPECT_EQ(errorOf("directories: []\nreplicas: many\n"),
            "options.yaml:2: replicas: expected an integer, got many");
  EXPECT_EQ(errorOf("directories: []\npolicy: pin\n"),
            "options.yaml:2: policy: expected one of Pin, LRU, got pin");
  EXPECT_EQ(errorOf("directories:\n  - path: /a\n    quota: lots\n"),
            "options.yaml:3: directories[0].quota: expected a byte quantity such as 1073741824, "
            "500Mi or 2Ti, got lots");
  EXPECT_EQ(errorOf("directories: []\ntimeout: 30\n"),
            "options.yaml:2: timeout: expected a duration such as 250ms, 30s or 5m, got 30");
}

TEST(Config, QuotedNumbersAndBooleansAreStrings) {
  EXPECT_EQ(errorOf("directories: []\nreplicas: \"3\"\n"),
            "options.yaml:2: replicas: expected an integer, got \"3\"");
  EXPECT_EQ(errorOf("directories: []\nverbose: 'true'\n"),
            "options.yaml:2: verbose: expected true or false, got \"true\"");
  EXPECT_EQ(errorOf("directories: []\nverbose: yes\n"),
            "options.yaml:2: verbose: expected true or false, got yes");
}

TEST(Config, MissingRequiredFieldIsNamed) {
  EXPECT_EQ(errorOf("replicas: 2\n"), "options.yaml:1: directories: required field is missing");
  EXPECT_EQ(errorOf("directories:\n  - path: /a\n"),
            "options.yaml:2: directories[0].quota: required field is missing");
}

TEST(Config, UnknownFieldsAreRejectedWithASuggestion) {
  EXPECT_EQ(errorOf("directories: []\nreplicaz: 2\n"),
            "options.yaml:2: replicaz: unknown field; did you mean \"replicas\"?");
  EXPECT_NE(errorOf("directories: []\ncolour: red\n").find("known fields are listen, replicas"),
            std::string::npos);
}

TEST(Config, AllErrorsAreReportedTogether) {
  const std::string message = errorOf("replicas: 0\npolicy: x\n");
  EXPECT_NE(message.find("replicas: expected"), std::string::npos);
  EXPECT_NE(message.find("policy: expected"), std::string::npos);
  EXPECT_NE(message.find("directories: required"), std::string::npos);
}

TEST(Config, WrongShapesAreNamed) {
  EXPECT_EQ(errorOf("directories: /a\n"), "options.yaml:1: directories: expected a list, got /a");
  EXPECT_EQ(errorOf("- 1\n- 2\n"), "options.yaml:1: expected a map, got a list");
  EXPECT_EQ(errorOf("directories: []\nlabels: [a]\n"),
            "options.yaml:2: labels: expected a map, got a list");
}

TEST(Config, KeysWithDotsAreBracketedInPaths) {
  EXPECT_EQ(errorOf("directories: []\nlabels:\n  granary.io/x: {a: 1}\n"),
            "options.yaml:3: labels[\"granary.io/x\"]: expected a string, got a map");
}

TEST(Config, SyntaxErrorsAndDuplicateKeysAreRejected) {
  EXPECT_NE(errorOf("a: [1, 2\n").find("options.yaml:"), std::string::npos);
  EXPECT_NE(errorOf("a: [1, 2\n").find("not valid YAML or JSON"), std::string::npos);
  EXPECT_EQ(errorOf("replicas: 1\nreplicas: 2\n"),
            "options.yaml:1: key \"replicas\" appears twice");
}

TEST(Config, OneDocumentExpectedWhereOneIsParsed) {
  EXPECT_EQ(errorOf("a: 1\n---\nb: 2\n"), "options.yaml: expected one document, found 2");
  auto all = config::parseAll("a: 1\n---\n---\nb: 2\n", "m.yaml");
  ASSERT_TRUE(all.isOk());
  EXPECT_EQ(all->size(), 2u);
}

TEST(Config, DeepNestingIsRefused) {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  auto node = config::parse(deep, "deep.json");
  ASSERT_FALSE(node.isOk());
  EXPECT_NE(node.status().message().find("nested deeper than 64 levels"), std::string::npos);
}

TEST(Config, AliasExpansionIsBounded) {
  // Each level references the previous one ten times: 10^7 nodes once expanded.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 7; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) bomb += (j ? ", " : "") + prev;
    bomb += "]\n";
  }
  auto node = config::parse(bomb, "bomb.yaml");
  ASSERT_FALSE(node.isOk());
  EXPECT_NE(node.status().message().find("more than 1,000,000 nodes"), std::string::npos);
}

TEST(Config, DecodeFileReadsOneDocument) {
  const auto path = std::filesystem::temp_directory_path() / "granary_config_test.yaml";
  {
    std::ofstream out(path);
    out << "directories:\n  - path: /cache\n    quota: 10Gi\n";
  }
  auto options = config::decodeFile<Options>(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(options.isOk()) << options.status();
  EXPECT_EQ(options->directories.at(0).quota.bytes, 10LL << 30);

  auto missing = config::decodeFile<Options>("/nonexistent/granary.yaml");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/granary.yaml"), std::string::npos);
}

TEST(Config, BuiltNodesCarryPaths) {
  Node node = Node::mapNode({{"spec", Node::mapNode({{"workers", Node::scalarNode("x")}})}});
  int64_t workers = 0;
  const Node* spec = node.find("spec");
  ASSERT_NE(spec, nullptr);
  Status status = config::decodeValue(*spec->find("workers"), workers);
  EXPECT_EQ(status.message(), "spec.workers: expected an integer, got x");
}

TEST(Config, ACommaAfterAFlowCollectionIsAnErrorNotAHang) {
  // Found by tests/fuzz/manifest_fuzz: yaml-cpp 0.7's LoadAll never returns on these (it starts
  // an empty document at the ',' again and again), so parseAll must refuse them before.
  for (const char* text : {"{\"\":{}},", "[],", "{a: b}, c", ",", "x: 1\n---\n[a],\n"}) {
    auto documents = config::parseAll(text, "m.yaml");
    ASSERT_FALSE(documents.isOk()) << text;
    EXPECT_EQ(documents.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(documents.status().message().find("not valid YAML or JSON: unexpected ','"),
              std::string::npos)
        << documents.status();
  }
  auto nested = config::parseAll("a: [1, 2]\nb: {c: [], d: {}}\n", "m.yaml");
  ASSERT_TRUE(nested.isOk()) << nested.status();
  EXPECT_EQ(nested->size(), 1u);
}

}  // namespace
}  // namespace granary
