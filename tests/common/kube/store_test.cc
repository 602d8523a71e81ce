#include "common/kube/store.h"

#include <gtest/gtest.h>

namespace granary::kube {
namespace {

ObjectPtr pod(const std::string& ns, const std::string& name, const std::string& node,
              const std::string& owner = "") {
  Json p = Json::object();
  p["metadata"] = Json::object();
  p["metadata"]["namespace"] = Json::string(ns);
  p["metadata"]["name"] = Json::string(name);
  p["metadata"]["labels"] = Json::object();
  p["metadata"]["labels"]["granary.io/job-name"] = Json::string("job-" + owner);
  if (!owner.empty()) {
    p["metadata"]["ownerReferences"] = Json::array(1);
    p["metadata"]["ownerReferences"][0]["uid"] = Json::string(owner);
  }
  p["spec"] = Json::object();
  if (!node.empty()) p["spec"]["nodeName"] = Json::string(node);
  return std::make_shared<const Json>(p);
}

std::vector<std::string> names(const std::vector<ObjectPtr>& objects) {
  std::vector<std::string> out;
  for (const auto& o : objects) out.push_back(nameOf(*o));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Store, IndexesFollowEveryChange) {
  Store store;
  store.addIndex("node", indexPodsByNode());
  store.addIndex("namespace", indexByNamespace());
  store.addIndex("owner", indexByOwnerUid());
  store.addIndex("job", indexByLabel("granary.io/job-name"));

  EXPECT_EQ(store.upsert(pod("ml", "w0", "n1", "u1")), nullptr);
  store.upsert(pod("ml", "w1", "n1", "u1"));
  store.upsert(pod("cv", "x", "n2"));
  store.upsert(pod("ml", "pending", ""));
  EXPECT_EQ(names(store.byIndex("node", "n1")), (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(names(store.byIndex("namespace", "ml")).size(), 3u);
  EXPECT_EQ(names(store.byIndex("owner", "u1")), (std::vector<std::string>{"w0", "w1"}));
  EXPECT_EQ(names(store.byIndex("job", "job-u1")), (std::vector<std::string>{"w0", "w1"}));

  // Moving a pod moves it between index entries.
  ASSERT_NE(store.upsert(pod("ml", "w1", "n2", "u1")), nullptr);
  EXPECT_EQ(names(store.byIndex("node", "n1")), (std::vector<std::string>{"w0"}));
  EXPECT_EQ(names(store.byIndex("node", "n2")), (std::vector<std::string>{"w1", "x"}));

  ASSERT_NE(store.erase("ml/w0"), nullptr);
  EXPECT_TRUE(store.byIndex("node", "n1").empty());
  EXPECT_EQ(store.erase("ml/w0"), nullptr);
  EXPECT_EQ(store.size(), 3u);
}

TEST(Store, ReplaceReturnsWhatWasDroppedAndReindexes) {
  Store store;
  store.addIndex("node", indexPodsByNode());
  store.upsert(pod("ml", "a", "n1"));
  store.upsert(pod("ml", "b", "n1"));
  const auto dropped = store.replace({pod("ml", "b", "n2"), pod("ml", "c", "n1")});
  EXPECT_EQ(names(dropped), (std::vector<std::string>{"a"}));
  EXPECT_EQ(names(store.byIndex("node", "n1")), (std::vector<std::string>{"c"}));
  EXPECT_EQ(names(store.byIndex("node", "n2")), (std::vector<std::string>{"b"}));
  EXPECT_EQ(store.keys(), (std::vector<std::string>{"ml/b", "ml/c"}));
}

TEST(Store, IndexAddedLaterCoversExistingObjects) {
  Store store;
  store.upsert(pod("ml", "a", "n1"));
  store.addIndex("node", indexPodsByNode());
  EXPECT_EQ(names(store.byIndex("node", "n1")), (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace granary::kube
