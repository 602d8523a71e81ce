// The REST client against the API-server double, or against a real cluster with
// GRANARY_TEST_KUBECONFIG: the same tests, the same expectations.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/kube/api_error.h"
#include "common/kube/client.h"
#include "tests/support/cluster.h"
#include "tests/support/fake_clock.h"

namespace granary::testing {
namespace {

using kube::Json;
namespace resources = kube::resources;
using namespace std::chrono_literals;

class ClientContract : public ClusterTest {
 protected:
  Json dataset(const std::string& name, const std::string& uri = "s3://bucket/data/") {
    return yaml("apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: " + name +
                ", labels: {team: vision}}\nspec: {source: {uri: \"" + uri + "\"}}");
  }
};

TEST_F(ClientContract, DatasetCrudWithDefaultsAndGeneration) {
  auto created = client().create(resources::datasets(), ns(), dataset("imagenet"));
  ASSERT_TRUE(created.isOk()) << created.status();
  EXPECT_EQ(kube::namespaceOf(*created), ns());
  EXPECT_FALSE(kube::uidOf(*created).empty());
  EXPECT_EQ(created->at("metadata").at("generation").as_integer(), 1);
  // Defaults from the CRD's schema.
  EXPECT_EQ(created->at("spec").at("cache").at("policy").as_string(), "Pin");
  EXPECT_EQ(created->at("spec").at("cache").at("replicas").as_integer(), 1);

  auto fetched = client().get(resources::datasets(), ns(), "imagenet");
  ASSERT_TRUE(fetched.isOk()) << fetched.status();
  EXPECT_EQ(kube::resourceVersionOf(*fetched), kube::resourceVersionOf(*created));

  Json changed = *fetched;
  changed["spec"]["cache"]["replicas"] = Json::number(2);
  auto updated = client().update(resources::datasets(), changed);
  ASSERT_TRUE(updated.isOk()) << updated.status();
  EXPECT_EQ(updated->at("metadata").at("generation").as_integer(), 2);
  EXPECT_NE(kube::resourceVersionOf(*updated), kube::resourceVersionOf(*fetched));

  ASSERT_TRUE(client().remove(resources::datasets(), ns(), "imagenet").isOk());
  EXPECT_EQ(client().get(resources::datasets(), ns(), "imagenet").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(client().remove(resources::datasets(), ns(), "imagenet").code(), StatusCode::kNotFound);
}

TEST_F(ClientContract, TrainingJobDefaults) {
  auto created = client().create(resources::trainingJobs(), ns(), yaml(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: resnet}
spec:
  datasets: [{name: imagenet, mountPath: /data}]
  template: {spec: {containers: [{name: trainer, image: busybox}]}}
)"));
  ASSERT_TRUE(created.isOk()) << created.status();
  const Json& spec = created->at("spec");
  EXPECT_EQ(spec.at("workers").as_integer(), 1);
  EXPECT_EQ(spec.at("warmPolicy").as_string(), "Parallel");
  EXPECT_EQ(spec.at("scheduling").at("schedulerName").as_string(), "granary-scheduler");
  EXPECT_EQ(spec.at("runPolicy").at("backoffLimit").as_integer(), 3);
}

TEST_F(ClientContract, StatusSubresourceSplit) {
  auto created = client().create(resources::datasets(), ns(), dataset("split"));
  ASSERT_TRUE(created.isOk()) << created.status();

  // The main resource ignores status.
  Json withStatus = *created;
  withStatus["status"] = yaml("phase: Ready");
  auto main = client().update(resources::datasets(), withStatus);
  ASSERT_TRUE(main.isOk()) << main.status();
  EXPECT_FALSE(main->has_field("status"));

  // /status takes status and ignores spec.
  Json statusWrite = *main;
  statusWrite["status"] = yaml("{phase: Warming, cachedBytes: 42}");
  statusWrite["spec"]["cache"]["replicas"] = Json::number(9);
  auto status = client().updateStatus(resources::datasets(), statusWrite);
  ASSERT_TRUE(status.isOk()) << status.status();
  EXPECT_EQ(status->at("status").at("phase").as_string(), "Warming");
  EXPECT_EQ(status->at("spec").at("cache").at("replicas").as_integer(), 1);
  EXPECT_EQ(status->at("metadata").at("generation").as_integer(), 1);

  auto patched = client().mergePatch(resources::datasets(), ns(), "split",
                                     yaml("status: {cachedBytes: 43}"), "status");
  ASSERT_TRUE(patched.isOk()) << patched.status();
  EXPECT_EQ(patched->at("status").at("cachedBytes").as_integer(), 43);
  EXPECT_EQ(patched->at("status").at("phase").as_string(), "Warming");
}

TEST_F(ClientContract, ConflictsOnStaleVersionsAndDuplicates) {
  auto created = client().create(resources::datasets(), ns(), dataset("race"));
  ASSERT_TRUE(created.isOk()) << created.status();
  Json first = *created;
  first["metadata"]["labels"]["writer"] = Json::string("one");
  ASSERT_TRUE(client().update(resources::datasets(), first).isOk());

  Json second = *created;  // still carries the old resourceVersion
  second["metadata"]["labels"]["writer"] = Json::string("two");
  EXPECT_EQ(client().update(resources::datasets(), second).status().code(), StatusCode::kConflict);
  EXPECT_EQ(client().create(resources::datasets(), ns(), dataset("race")).status().code(),
            StatusCode::kAlreadyExists);
}

TEST_F(ClientContract, ApplyCreatesThenIsIdempotent) {
  const Json desired = dataset("applied");
  auto first = client().apply(resources::datasets(), ns(), "applied", desired,
                              {.fieldManager = "granary-test"});
  ASSERT_TRUE(first.isOk()) << first.status();
  auto second = client().apply(resources::datasets(), ns(), "applied", desired,
                               {.fieldManager = "granary-test"});
  ASSERT_TRUE(second.isOk()) << second.status();
  EXPECT_EQ(kube::resourceVersionOf(*second), kube::resourceVersionOf(*first));

  Json changed = desired;
  changed["metadata"]["labels"]["team"] = Json::string("speech");
  auto third = client().apply(resources::datasets(), ns(), "applied", changed,
                              {.fieldManager = "granary-test"});
  ASSERT_TRUE(third.isOk()) << third.status();
  EXPECT_EQ(third->at("metadata").at("labels").at("team").as_string(), "speech");
}

TEST_F(ClientContract, MergePatchSetsAndRemoves) {
  ASSERT_TRUE(client().create(resources::datasets(), ns(), dataset("patched")).isOk());
  auto patched = client().mergePatch(resources::datasets(), ns(), "patched",
                                     yaml("metadata: {labels: {team: null, tier: gold}}"));
  ASSERT_TRUE(patched.isOk()) << patched.status();
  const auto labels = kube::stringMap(*patched);
  EXPECT_EQ(labels.count("team"), 0u);
  EXPECT_EQ(labels.at("tier"), "gold");
  EXPECT_EQ(client()
                .mergePatch(resources::datasets(), ns(), "absent", yaml("metadata: {}"))
                .status()
                .code(),
            StatusCode::kNotFound);
}

TEST_F(ClientContract, ListWithSelectorsAndPages) {
  for (int i = 0; i < 25; ++i) {
    auto created = client().create(
        resources::secrets(), ns(),
        yaml("metadata: {name: s" + std::to_string(i) +
             ", labels: {parity: " + (i % 2 ? "odd" : "even") + "}}\nstringData: {k: v}"));
    ASSERT_TRUE(created.isOk()) << created.status();
  }
  auto page =
      client().list(resources::secrets(), ns(), {.labelSelector = "parity=odd", .limit = 5});
  ASSERT_TRUE(page.isOk()) << page.status();
  EXPECT_EQ(page->items.size(), 5u);
  EXPECT_FALSE(page->continueToken.empty());
  EXPECT_FALSE(page->resourceVersion.empty());

  auto odd =
      client().listAll(resources::secrets(), ns(), {.labelSelector = "parity=odd", .limit = 5});
  ASSERT_TRUE(odd.isOk()) << odd.status();
  EXPECT_EQ(odd->items.size(), 12u);
  for (const auto& item : odd->items) {
    EXPECT_EQ(kube::stringMap(item).at("parity"), "odd");
    EXPECT_EQ(item.at("kind").as_string(), "Secret");
  }

  auto one = client().list(resources::secrets(), ns(), {.fieldSelector = "metadata.name=s7"});
  ASSERT_TRUE(one.isOk()) << one.status();
  ASSERT_EQ(one->items.size(), 1u);
  EXPECT_EQ(kube::nameOf(one->items[0]), "s7");

  EXPECT_EQ(client().list(resources::secrets(), ns(), {.labelSelector = "a in b"}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ClientContract, DeletePreconditionsAndFinalizers) {
  auto created = client().create(resources::datasets(), ns(), [&] {
    Json d = dataset("finalized");
    d["metadata"]["finalizers"] = yaml("[granary.io/cache-purge]");
    return d;
  }());
  ASSERT_TRUE(created.isOk()) << created.status();
  EXPECT_EQ(client()
                .remove(resources::datasets(), ns(), "finalized", {.preconditionUid = "wrong"})
                .code(),
            StatusCode::kConflict);

  ASSERT_TRUE(client().remove(resources::datasets(), ns(), "finalized").isOk());
  auto terminating = client().get(resources::datasets(), ns(), "finalized");
  ASSERT_TRUE(terminating.isOk()) << "a finalizer keeps the object: " << terminating.status();
  EXPECT_TRUE(terminating->at("metadata").has_field("deletionTimestamp"));

  auto released = client().mergePatch(resources::datasets(), ns(), "finalized",
                                      yaml("metadata: {finalizers: null}"));
  ASSERT_TRUE(released.isOk() || released.status().code() == StatusCode::kNotFound)
      << released.status();
  EXPECT_EQ(client().get(resources::datasets(), ns(), "finalized").status().code(),
            StatusCode::kNotFound);
}

TEST_F(ClientContract, PodBindingOnceOnly) {
  auto pod = client().create(resources::pods(), ns(), yaml(R"(
metadata: {name: worker-0}
spec:
  schedulerName: granary-test-nobody
  containers: [{name: c, image: busybox}]
)"));
  ASSERT_TRUE(pod.isOk()) << pod.status();
  ASSERT_TRUE(client().bindPod(ns(), "worker-0", kube::uidOf(*pod), "gpu-node-1").isOk());
  auto bound = client().get(resources::pods(), ns(), "worker-0");
  ASSERT_TRUE(bound.isOk());
  EXPECT_EQ(bound->at("spec").at("nodeName").as_string(), "gpu-node-1");
  EXPECT_EQ(client().bindPod(ns(), "worker-0", kube::uidOf(*pod), "gpu-node-2").code(),
            StatusCode::kConflict);
  EXPECT_EQ(client().bindPod(ns(), "absent", "", "gpu-node-1").code(), StatusCode::kNotFound);
}

// A pod on a node whose kubelet is gone would wait for it forever when deleted gracefully; with
// gracePeriodSeconds 0 it is gone at once, and its name is free again.
TEST_F(ClientContract, APodDeletedWithoutGraceIsGoneAtOnce) {
  const Json manifest = yaml(R"(
metadata: {name: worker-1}
spec:
  schedulerName: granary-test-nobody
  containers: [{name: c, image: busybox}]
)");
  auto pod = client().create(resources::pods(), ns(), manifest);
  ASSERT_TRUE(pod.isOk()) << pod.status();
  ASSERT_TRUE(client().bindPod(ns(), "worker-1", kube::uidOf(*pod), "gpu-node-lost").isOk());
  ASSERT_TRUE(
      client().remove(resources::pods(), ns(), "worker-1", {.gracePeriodSeconds = 0}).isOk());
  EXPECT_EQ(client().get(resources::pods(), ns(), "worker-1").status().code(),
            StatusCode::kNotFound);
  EXPECT_TRUE(client().create(resources::pods(), ns(), manifest).isOk());
}

TEST_F(ClientContract, WatchDeliversEveryChangeInOrder) {
  auto listed = client().list(resources::datasets(), ns());
  ASSERT_TRUE(listed.isOk()) << listed.status();

  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::pair<kube::WatchEvent::Type, std::string>> seen;
  std::stop_source stop;
  std::thread watcher([&] {
    const Status status = client().watch(
        resources::datasets(), ns(),
        {.resourceVersion = listed->resourceVersion, .timeoutSeconds = 60},
        [&](kube::WatchEvent&& event) {
          if (event.type == kube::WatchEvent::Type::kBookmark) return;
          std::lock_guard lock(mutex);
          seen.emplace_back(event.type, kube::nameOf(event.object));
          arrived.notify_all();
        },
        stop.get_token());
    EXPECT_EQ(status.code(), StatusCode::kCancelled) << status;
  });

  ASSERT_TRUE(client().create(resources::datasets(), ns(), dataset("watched")).isOk());
  ASSERT_TRUE(
      client()
          .mergePatch(resources::datasets(), ns(), "watched", yaml("metadata: {labels: {x: y}}"))
          .isOk());
  ASSERT_TRUE(client().remove(resources::datasets(), ns(), "watched").isOk());
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(arrived.wait_for(lock, std::chrono::seconds(30), [&] { return seen.size() >= 3; }));
  }
  stop.request_stop();
  watcher.join();
  using T = kube::WatchEvent::Type;
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::make_pair(T::kAdded, std::string("watched")));
  EXPECT_EQ(seen[1], std::make_pair(T::kModified, std::string("watched")));
  EXPECT_EQ(seen[2], std::make_pair(T::kDeleted, std::string("watched")));
}

TEST_F(ClientContract, WatchFromForgottenVersionIsGone) {
  ASSERT_TRUE(client().create(resources::datasets(), ns(), dataset("old")).isOk());
  cluster_->forgetHistory();
  const Status status = client().watch(
      resources::datasets(), ns(), {.resourceVersion = "1", .timeoutSeconds = 10},
      [](kube::WatchEvent&&) {}, std::stop_token{});
  EXPECT_EQ(status.code(), StatusCode::kGone) << status;
}

// Fault injection needs the double.
class ClientFaults : public ClientContract {
 protected:
  void SetUp() override {
    ClientContract::SetUp();
    if (!cluster_->isDouble()) GTEST_SKIP() << "fault injection needs the API-server double";
  }
};

TEST_F(ClientFaults, RetriesThrottlingAndServerErrorsHonouringRetryAfter) {
  auto& server = *cluster_->apiServerDouble();
  ASSERT_TRUE(client().create(resources::datasets(), ns(), dataset("retried")).isOk());
  server.failNextRequests(2, 429, 0);
  const int64_t before = server.requestCount();
  auto got = client().get(resources::datasets(), ns(), "retried");
  ASSERT_TRUE(got.isOk()) << got.status();
  EXPECT_EQ(server.requestCount() - before, 3);

  server.failNextRequests(100, 500);
  const int64_t start = server.requestCount();
  auto failed = client().get(resources::datasets(), ns(), "retried");
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(server.requestCount() - start, 5) << "maxAttempts bounds the retries";
  server.failNextRequests(0, 500);
}

TEST_F(ClientFaults, OtherClientErrorsAreNotRetried) {
  auto& server = *cluster_->apiServerDouble();
  const int64_t before = server.requestCount();
  EXPECT_EQ(client().get(resources::datasets(), ns(), "absent").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(server.requestCount() - before, 1);
}

TEST_F(ClientFaults, WrongTokenIsUnauthenticated) {
  kube::RestConfig config = cluster_->restConfig();
  config.bearerToken = Secret("wrong");
  auto client = kube::Client::create(config, {.maxAttempts = 1});
  ASSERT_TRUE(client.isOk());
  EXPECT_EQ((*client)->get(resources::namespaces(), "", "default").status().code(),
            StatusCode::kUnauthenticated);
}

TEST_F(ClientFaults, UnreachableAndSilentServersFailWithinTheTimeout) {
  kube::RestConfig config = cluster_->restConfig();
  config.server = "http://127.0.0.1:1";  // nothing listens on port 1
  auto refused = kube::Client::create(
      config, {.maxAttempts = 2, .backoff = {.initial = std::chrono::milliseconds(1)}});
  ASSERT_TRUE(refused.isOk());
  EXPECT_EQ((*refused)->get(resources::namespaces(), "", "default").status().code(),
            StatusCode::kUnavailable);

  cluster_->apiServerDouble()->setLatency(std::chrono::milliseconds(3000));
  kube::RestConfig slow = cluster_->restConfig();
  slow.timeout = std::chrono::seconds(1);
  auto silent = kube::Client::create(slow, {.maxAttempts = 1});
  ASSERT_TRUE(silent.isOk());
  const auto began = std::chrono::steady_clock::now();
  const auto status = (*silent)->get(resources::namespaces(), "", "default").status();
  EXPECT_TRUE(kube::isRetryable(status)) << status;
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(2900));
  cluster_->apiServerDouble()->setLatency(std::chrono::milliseconds(0));
}

TEST_F(ClientFaults, RetryAfterIsHonouredOnTheInjectedClock) {
  auto& server = *cluster_->apiServerDouble();
  FakeClock clock;
  auto client = kube::Client::create(cluster_->restConfig(),
                                     {.backoff = {.initial = 1ms, .max = 30s}, .clock = &clock});
  ASSERT_TRUE(client.isOk());
  server.failNextRequests(1, 429, 7);
  Result<Json> got = internalError("not yet");
  Running request(
      [&](std::stop_token) { got = (*client)->get(resources::namespaces(), "", "default"); });
  clock.waitForSleepers(1);
  clock.advance(6999ms);
  EXPECT_EQ(clock.sleepers(), 1) << "still waiting out Retry-After: 7";
  clock.advance(1ms);
  request.join();
  EXPECT_TRUE(got.isOk()) << got.status();
}

TEST_F(ClientFaults, RotatedTokensAreReadFromTheTokenFile) {
  auto& server = *cluster_->apiServerDouble();
  const auto tokenFile = std::filesystem::temp_directory_path() / ("granary-token-" + ns());
  const auto writeToken = [&](const std::string& token) {
    std::ofstream out(tokenFile);
    out << token << "\n";
  };
  writeToken("first");
  kube::RestConfig config = cluster_->restConfig();
  config.bearerToken = Secret();
  config.tokenFile = tokenFile;
  auto client = kube::Client::create(config, {.maxAttempts = 1});
  ASSERT_TRUE(client.isOk());
  server.setToken("first");
  EXPECT_TRUE((*client)->get(resources::namespaces(), "", "default").isOk());
  // The kubelet rotates the projected token: new contents, new modification time.
  std::filesystem::last_write_time(tokenFile, std::filesystem::last_write_time(tokenFile) - 1h);
  writeToken("second");
  server.setToken("second");
  EXPECT_TRUE((*client)->get(resources::namespaces(), "", "default").isOk());
  server.setToken("test-token");
  std::filesystem::remove(tokenFile);
}

TEST_F(ClientFaults, NonJsonBodiesAreErrorsNotCrashes) {
  cluster_->apiServerDouble()->garbleNextResponses(1);
  auto got = client().get(resources::namespaces(), "", "default");
  EXPECT_EQ(got.status().code(), StatusCode::kInternal);
  EXPECT_NE(got.status().message().find("response is not JSON"), std::string::npos);
}

TEST_F(ClientFaults, WatchesCarryBookmarks) {
  std::atomic<int> bookmarks{0};
  Running watch([&](std::stop_token stop) {
    (void)client().watch(
        resources::datasets(), ns(), {.timeoutSeconds = 30},
        [&](kube::WatchEvent&& event) {
          if (event.type == kube::WatchEvent::Type::kBookmark) ++bookmarks;
        },
        stop);
  });
  EXPECT_TRUE(eventually([&] { return bookmarks > 0; }, 10s));
}

TEST_F(ClientFaults, BrokenWatchIsUnavailableNotACrash) {
  auto& server = *cluster_->apiServerDouble();
  const int64_t before = server.watchesStarted();
  Status result;
  const auto began = std::chrono::steady_clock::now();
  Running watcher([&](std::stop_token stop) {
    result = client().watch(
        resources::datasets(), ns(), {.timeoutSeconds = 60}, [&](kube::WatchEvent&&) {}, stop);
  });
  ASSERT_TRUE(eventually([&] { return server.watchesStarted() > before; }, 10s));
  cluster_->dropWatches();
  watcher.join();
  EXPECT_TRUE(result.isOk() || result.code() == StatusCode::kUnavailable) << result;
  EXPECT_LT(std::chrono::steady_clock::now() - began, 30s) << "the break ended the call";
}

}  // namespace
}  // namespace granary::testing
