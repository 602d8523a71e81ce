// What the Dataset controller asks of a cache node, and a node's refusal said in the Dataset's
// terms.
#include "operator/ensure_request.h"

#include <gtest/gtest.h>

namespace granary::op {
namespace {

api::Dataset datasetWith(std::vector<std::string> mountNames) {
  api::Dataset dataset;
  for (auto& name : mountNames) dataset.spec.mounts.push_back({.name = std::move(name)});
  return dataset;
}

TEST(InSpecTerms, OneSourceIsSpecSource) {
  EXPECT_EQ(inSpecTerms("mounts[0].source.uri: file:///var/lib/kubelet/ is outside the cache "
                        "node's fileOriginRoots",
                        datasetWith({""})),
            "spec.source.uri: file:///var/lib/kubelet/ is outside the cache node's "
            "fileOriginRoots");
}

TEST(InSpecTerms, WhatTheClientPutsBeforeItStays) {
  EXPECT_EQ(inSpecTerms("cache node 10.0.0.7:7400: mounts[0].source.options.addressing: no",
                        datasetWith({""})),
            "cache node 10.0.0.7:7400: spec.source.options.addressing: no");
}

TEST(InSpecTerms, NamedMountsKeepTheirIndex) {
  EXPECT_EQ(inSpecTerms("mounts[1].source.options.addressing: not an option",
                        datasetWith({"images", "labels"})),
            "spec.mounts[1].source.options.addressing: not an option");
}

TEST(InSpecTerms, OtherMessagesAreLeftAlone) {
  EXPECT_EQ(inSpecTerms("cache.capacity_bytes: more than the node has", datasetWith({""})),
            "cache.capacity_bytes: more than the node has");
  EXPECT_EQ(inSpecTerms("mounts[0 without a field", datasetWith({""})), "mounts[0 without a field");
}

}  // namespace
}  // namespace granary::op
