// Fuzzes the scheduler extender's request decoding (scheduler/extender.h): the body of a
// kube-scheduler filter or prioritize call (ExtenderArgs: the pod, and the candidate nodes as
// objects or names) → the answer, as ExtenderServer's handler does it.
//
// Invariants beyond "no crash" (an exception escaping the handler ends the scheduler):
//   - filter always answers the ExtenderFilterResult shape; without an Error it names only
//     nodes it was asked about, and none both passing and failing;
//   - prioritize answers a list of {Host, Score} with scores from 0 to 10.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "scheduler/extender.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/scheduler/core/fixtures.h"

namespace granary::scheduler {
namespace {

using kube::Json;

const ClusterState& cluster() {
  static const ClusterState* state = [] {
    auto* s = new ClusterState();
    for (const char* name : {"n1", "n2", "n3"}) s->upsertNode(testing::gpuNode(name));
    s->assume("ml/other", "n3", testing::worker("ml/other", 8).requests);  // n3 is full
    return s;
  }();
  return *state;
}

Extender extender(api::Locality locality) {
  return Extender(cluster(), [locality](const Json&) {
    return PodData{{{"imagenet", 1000, {{"n1", 250}, {"n2", 1000}}}}, locality};
  });
}

// The node names a request asks about, as candidatesOf reads them.
std::set<std::string> askedAbout(const Json& args) {
  std::set<std::string> names;
  if (!args.is_object()) return names;
  if (args.has_array_field("NodeNames")) {
    for (const auto& name : args.at("NodeNames").as_array()) {
      if (name.is_string()) names.insert(name.as_string());
    }
  } else if (args.has_object_field("Nodes") && args.at("Nodes").has_array_field("items")) {
    for (const auto& item : args.at("Nodes").at("items").as_array()) {
      names.insert(kube::nameOf(item));
    }
  }
  return names;
}

void checkFilter(const Json& args, const Json& result) {
  const std::string text = result.serialize();
  GRANARY_FUZZ_CHECK(result.is_object() && result.has_string_field("Error") &&
                         result.has_object_field("FailedNodes") &&
                         result.has_object_field("FailedAndUnresolvableNodes") &&
                         result.has_field("Nodes") && result.has_field("NodeNames"),
                     "not an ExtenderFilterResult: " + text);
  if (!result.at("Error").as_string().empty()) return;
  const std::set<std::string> asked = askedAbout(args);
  std::set<std::string> answered;
  const auto answer = [&](const std::string& name) {
    GRANARY_FUZZ_CHECK(asked.count(name), "answers about a node not asked about: " + name);
  };
  for (const char* failed : {"FailedNodes", "FailedAndUnresolvableNodes"}) {
    for (const auto& [name, reason] : result.at(failed).as_object()) {
      GRANARY_FUZZ_CHECK(reason.is_string(), text);
      answer(name);
    }
  }
  if (result.at("NodeNames").is_array()) {
    for (const auto& name : result.at("NodeNames").as_array()) {
      GRANARY_FUZZ_CHECK(name.is_string(), text);
      answer(name.as_string());
      GRANARY_FUZZ_CHECK(!result.at("FailedNodes").has_field(name.as_string()) &&
                             !result.at("FailedAndUnresolvableNodes").has_field(name.as_string()),
                         "a node both passes and fails: " + text);
    }
  } else {
    GRANARY_FUZZ_CHECK(result.at("Nodes").has_array_field("items"),
                       "neither NodeNames nor Nodes.items: " + text);
    for (const auto& node : result.at("Nodes").at("items").as_array()) {
      answer(kube::nameOf(node));
    }
  }
}

void checkPrioritize(const Json& result) {
  const std::string text = result.serialize();
  GRANARY_FUZZ_CHECK(result.is_array(), "not a HostPriorityList: " + text);
  for (const auto& entry : result.as_array()) {
    GRANARY_FUZZ_CHECK(entry.has_string_field("Host") && entry.has_integer_field("Score"), text);
    const int score = entry.at("Score").as_integer();
    GRANARY_FUZZ_CHECK(score >= 0 && score <= 10, "a score outside 0-10: " + text);
  }
}

}  // namespace
}  // namespace granary::scheduler

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace granary;
  using namespace granary::scheduler;
  if (size > 64 * 1024) return 0;
  kube::Json args;
  try {  // as ExtenderServer's handler reads the body
    args = kube::Json::parse(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const std::exception&) {
    args = kube::Json::null();
  }
  for (const auto locality : {api::Locality::kPreferred, api::Locality::kRequired}) {
    const Extender e = extender(locality);
    checkFilter(args, e.filter(args));
    checkPrioritize(e.prioritize(args));
  }
  return 0;
}
