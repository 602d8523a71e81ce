// Informers against the API-server double, or a real cluster with GRANARY_TEST_KUBECONFIG.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "common/kube/informer.h"
#include "tests/support/cluster.h"
#include "tests/support/fake_clock.h"

namespace granary::testing {
namespace {

using kube::Json;
namespace resources = kube::resources;
using namespace std::chrono_literals;

class InformerContract : public ClusterTest {
 protected:
  Json secret(const std::string& name, int version) {
    return yaml("metadata: {name: " + name + ", labels: {app: churn}}\nstringData: {v: \"" +
                std::to_string(version) + "\"}");
  }

  // The names and data of every object the server lists now.
  std::map<std::string, std::string> serverView() {
    auto listed = client().listAll(resources::secrets(), ns(), {.labelSelector = "app=churn"});
    EXPECT_TRUE(listed.isOk()) << listed.status();
    std::map<std::string, std::string> view;
    if (listed.isOk()) {
      for (const auto& item : listed->items)
        view[kube::nameOf(item)] = kube::resourceVersionOf(item);
    }
    return view;
  }

  static std::map<std::string, std::string> cacheView(const kube::Store& store) {
    std::map<std::string, std::string> view;
    for (const auto& object : store.list())
      view[kube::nameOf(*object)] = kube::resourceVersionOf(*object);
    return view;
  }

  // Whether the cache comes to equal what the server lists.
  bool converges(kube::Informer& informer, std::chrono::seconds limit = 60s) {
    return eventually([&] { return cacheView(informer.store()) == serverView(); }, limit);
  }
};

TEST_F(InformerContract, ListsThenFollowsChangesWithHandlers) {
  ASSERT_TRUE(client().create(resources::secrets(), ns(), secret("before", 0)).isOk());
  kube::Informer informer(client(),
                          {.type = resources::secrets(), .ns = ns(), .labelSelector = "app=churn"});
  std::mutex mutex;
  std::vector<std::string> events;
  informer.addHandler({
      .onAdd =
          [&](const kube::ObjectPtr& o) {
            std::lock_guard l(mutex);
            events.push_back("add " + kube::nameOf(*o));
          },
      .onUpdate =
          [&](const kube::ObjectPtr&, const kube::ObjectPtr& o) {
            std::lock_guard l(mutex);
            events.push_back("update " + kube::nameOf(*o));
          },
      .onDelete =
          [&](const kube::ObjectPtr& o) {
            std::lock_guard l(mutex);
            events.push_back("delete " + kube::nameOf(*o));
          },
  });
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::stop_token{}));
  EXPECT_NE(informer.store().get(ns() + "/before"), nullptr);

  ASSERT_TRUE(client().create(resources::secrets(), ns(), secret("after", 0)).isOk());
  ASSERT_TRUE(client()
                  .update(resources::secrets(),
                          [&] {
                            Json s = *client().get(resources::secrets(), ns(), "after");
                            s["stringData"] = yaml("{v: \"1\"}");
                            return s;
                          }())
                  .isOk());
  ASSERT_TRUE(client().remove(resources::secrets(), ns(), "before").isOk());
  ASSERT_TRUE(converges(informer));
  informer.stop();
  std::lock_guard lock(mutex);
  EXPECT_EQ(events,
            (std::vector<std::string>{"add before", "add after", "update after", "delete before"}));
}

TEST_F(InformerContract, ResyncRedeliversEveryObjectOnTheClock) {
  ASSERT_TRUE(client().create(resources::secrets(), ns(), secret("steady", 0)).isOk());
  FakeClock clock;
  kube::Informer informer(
      client(),
      {.type = resources::secrets(), .ns = ns(), .labelSelector = "app=churn", .resync = 30s},
      clock);
  std::atomic<int> resyncs{0};
  informer.addHandler(
      {.onUpdate = [&](const kube::ObjectPtr& previous, const kube::ObjectPtr& now) {
        if (previous == now) ++resyncs;
      }});
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::stop_token{}));
  clock.waitForSleepers(1);
  clock.advance(29s);
  EXPECT_EQ(resyncs.load(), 0);
  clock.advance(1s);
  EXPECT_TRUE(eventually([&] { return resyncs.load() == 1; }, 10s));
  clock.waitForSleepers(1);  // asleep until the next period
  EXPECT_EQ(resyncs.load(), 1);
}

TEST_F(InformerContract, TransformShrinksWhatIsCached) {
  ASSERT_TRUE(client().create(resources::secrets(), ns(), secret("listed", 0)).isOk());
  kube::Informer informer(client(), {.type = resources::secrets(),
                                     .ns = ns(),
                                     .labelSelector = "app=churn",
                                     .transform = [](Json object) {
                                       kube::eraseField(object, "data");
                                       kube::eraseField(object, "stringData");
                                       return object;
                                     }});
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::stop_token{}));
  ASSERT_TRUE(client().create(resources::secrets(), ns(), secret("watched", 0)).isOk());
  ASSERT_TRUE(eventually([&] { return informer.store().size() == 2; }, 30s));
  for (const auto& object : informer.store().list()) {
    EXPECT_FALSE(object->has_field("data") || object->has_field("stringData"))
        << kube::nameOf(*object);
    EXPECT_FALSE(kube::resourceVersionOf(*object).empty());
  }
}

TEST_F(InformerContract, ResumesAfterTheServerEndsWatches) {
  // A one-second watch timeout makes the server end the stream again and again.
  kube::Informer informer(client(), {.type = resources::secrets(),
                                     .ns = ns(),
                                     .labelSelector = "app=churn",
                                     .watchTimeoutSeconds = 1});
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::stop_token{}));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(
        client().create(resources::secrets(), ns(), secret("s" + std::to_string(i), 0)).isOk());
    // The next write goes to the next watch stream.
    ASSERT_TRUE(eventually([&] { return informer.watchRestarts() > i; }, 10s));
  }
  ASSERT_TRUE(converges(informer));
  EXPECT_EQ(informer.relists(), 0) << "a normal watch end resumes from the last resourceVersion";
}

TEST_F(InformerContract, RelistsAfterGoneAndForgetsDeletedObjects) {
  if (!cluster_->isDouble()) GTEST_SKIP() << "forcing 410 mid-watch needs the API-server double";
  auto& server = *cluster_->apiServerDouble();
  ASSERT_TRUE(client().create(resources::secrets(), ns(), secret("doomed", 0)).isOk());
  kube::Informer informer(client(), {.type = resources::secrets(),
                                     .ns = ns(),
                                     .labelSelector = "app=churn",
                                     .backoff = {.initial = 10ms, .max = 100ms}});
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::stop_token{}));
  // While the watch is broken, the object goes and history is compacted: the informer can only
  // learn of the deletion by re-listing.
  server.refuseWatches(true);
  server.dropWatches();
  ASSERT_TRUE(eventually([&] { return informer.watchRestarts() >= 2; }, 10s)) << "watch retried";
  ASSERT_TRUE(client().remove(resources::secrets(), ns(), "doomed").isOk());
  ASSERT_TRUE(client().create(resources::secrets(), ns(), secret("born", 0)).isOk());
  server.compact();
  server.refuseWatches(false);
  ASSERT_TRUE(converges(informer));
  EXPECT_EQ(informer.store().get(ns() + "/doomed"), nullptr);
  EXPECT_NE(informer.store().get(ns() + "/born"), nullptr);
  EXPECT_EQ(informer.relists(), 1);
}

TEST_F(InformerContract, ConvergesUnderChurnWithDroppedWatches) {
  kube::Informer informer(client(), {.type = resources::secrets(),
                                     .ns = ns(),
                                     .labelSelector = "app=churn",
                                     .pageSize = 100,
                                     .watchTimeoutSeconds = 5,
                                     .backoff = {.initial = 10ms, .max = 200ms}});
  informer.start();
  ASSERT_TRUE(informer.waitForSync(std::stop_token{}));

  std::mt19937 random(7);
  constexpr int kObjects = 2000;
  std::map<std::string, int> versions;
  for (int op = 0; op < kObjects * 2; ++op) {
    const std::string name = "o" + std::to_string(random() % kObjects);
    const auto it = versions.find(name);
    Status status;
    if (it == versions.end()) {
      status = client().create(resources::secrets(), ns(), secret(name, 0)).status();
      versions[name] = 0;
    } else if (random() % 3 == 0) {
      status = client().remove(resources::secrets(), ns(), name);
      versions.erase(it);
    } else {
      status = client()
                   .mergePatch(resources::secrets(), ns(), name,
                               yaml("stringData: {v: \"" + std::to_string(++it->second) + "\"}"))
                   .status();
    }
    ASSERT_TRUE(status.isOk()) << status;
    if (op % 500 == 250) cluster_->dropWatches();
    if (op % 1500 == 750) cluster_->forgetHistory();
  }
  ASSERT_TRUE(converges(informer, 120s))
      << "cache " << informer.store().size() << " vs server " << serverView().size();
  EXPECT_EQ(informer.store().size(), versions.size());
  if (cluster_->isDouble()) {
    EXPECT_GE(informer.watchRestarts(), 8) << "the drops were felt";
  }
}

}  // namespace
}  // namespace granary::testing
