// When a Dataset is refreshed and what its status says (operator/core/dataset_refresh.h).
#include "operator/core/dataset_refresh.h"

#include <gtest/gtest.h>

#include "operator/core/cache_generation.h"
#include "operator/core/conditions.h"
#include "tests/support/cluster.h"

namespace granary::op {
namespace {

using kube::Json;
using namespace std::chrono_literals;
using State = RefreshAnswer::State;

const auto kStart = std::chrono::system_clock::time_point(std::chrono::hours(500'000));

// A Dataset settled on version 1 since kStart, with `interval` and `requested`.
RefreshObservation settled(std::optional<std::chrono::nanoseconds> interval = std::nullopt,
                           std::string requested = "") {
  RefreshObservation o{.interval = interval,
                       .requested = std::move(requested),
                       .previous = Json::object(),
                       .version = 1,
                       .generation = 1,
                       .settled = true,
                       .now = kStart};
  o.previous["version"] = Json::number(1);
  o.previous["versionTime"] = Json::string(kube::metav1Time(kStart));
  return o;
}

Result<RefreshAnswer> answered(State state, int64_t added = 0, int64_t changed = 0,
                               int64_t removed = 0, bool started = false) {
  return RefreshAnswer{.state = state,
                       .lister = "node-a",
                       .started = started,
                       .listed = 10,
                       .added = added,
                       .changed = changed,
                       .removed = removed,
                       .message = state == State::kFailed ? "origin unreachable" : ""};
}

TEST(DatasetRefresh, NothingIsAskedWithoutAnIntervalOrARequest) {
  RefreshObservation o = settled();
  o.now = kStart + 1000h;
  EXPECT_FALSE(refreshToAsk(o));
  const RefreshStep step = refreshStep(o, Json::object(), std::nullopt, notFound("not asked"));
  EXPECT_EQ(step.status.at("version").as_number().to_int64(), 1);
  EXPECT_FALSE(step.status.has_field("refresh"));
  EXPECT_FALSE(step.event);
}

TEST(DatasetRefresh, TheIntervalCountsFromTheVersionThenFromTheLastRefresh) {
  RefreshObservation o = settled(1h);
  o.now = kStart + 59min;
  EXPECT_FALSE(refreshToAsk(o));
  EXPECT_EQ(refreshStep(o, Json::object(), std::nullopt, notFound("")).requeueAfter,
            std::optional<std::chrono::milliseconds>(1min))
      << "looked at again when it is due";
  o.now = kStart + 1h;
  const auto ask = refreshToAsk(o);
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->next, 2);
  // Unchanged: the next is an interval after this one.
  const RefreshStep step = refreshStep(o, Json::object(), ask, answered(State::kUnchanged));
  EXPECT_EQ(kube::pathValue(step.status, "refresh.state").as_string(), "Unchanged");
  EXPECT_EQ(kube::pathValue(step.status, "refresh.nextTime").as_string(),
            kube::metav1Time(kStart + 2h));
  EXPECT_EQ(step.status.at("version").as_number().to_int64(), 1);
  EXPECT_FALSE(step.newVersion);
  EXPECT_FALSE(step.event) << "an unchanged origin writes only the refresh's time and outcome";
  o.previous = step.status;
  o.now = kStart + 2h - 1s;
  EXPECT_FALSE(refreshToAsk(o));
  o.now = kStart + 2h;
  EXPECT_TRUE(refreshToAsk(o));
}

TEST(DatasetRefresh, ANewRequestValueAsksOnceAndNotBeforeTheVersionSettles) {
  RefreshObservation o = settled(std::nullopt, "monday");
  o.settled = false;
  EXPECT_FALSE(refreshToAsk(o)) << "a version still warming is not refreshed";
  o.settled = true;
  const auto ask = refreshToAsk(o);
  ASSERT_TRUE(ask);
  const RefreshStep step = refreshStep(o, Json::object(), ask, answered(State::kUnchanged));
  EXPECT_EQ(kube::pathValue(step.status, "refresh.observedRequest").as_string(), "monday");
  o.previous = step.status;
  EXPECT_FALSE(refreshToAsk(o)) << "the same value again asks nothing";
  o.requested = "tuesday";
  EXPECT_TRUE(refreshToAsk(o));
}

TEST(DatasetRefresh, ARunningRefreshIsPolledUntilItMakesANewVersion) {
  RefreshObservation o = settled(std::nullopt, "now");
  const auto ask = refreshToAsk(o);
  ASSERT_TRUE(ask);
  RefreshStep step = refreshStep(o, Json::object(), ask, answered(State::kRunning, 0, 0, 0, true));
  EXPECT_FALSE(step.status.has_field("refresh")) << "just started: nothing written yet";
  EXPECT_EQ(step.requeueAfter, std::optional<std::chrono::milliseconds>(1s));
  o.previous = step.status;
  ASSERT_TRUE(refreshToAsk(o)) << "still due: asked again";
  step = refreshStep(o, Json::object(), refreshToAsk(o), answered(State::kRunning));
  EXPECT_EQ(kube::pathValue(step.status, "refresh.state").as_string(), "Running");
  EXPECT_EQ(kube::pathValue(step.status, "refresh.nextVersion").as_number().to_int64(), 2);
  EXPECT_EQ(kube::pathValue(step.status, "refresh.lister").as_string(), "node-a");
  EXPECT_EQ(step.requeueAfter, std::optional<std::chrono::milliseconds>(5s));
  // Polled even while the version is not settled (a node restarting), at the lister.
  o.previous = step.status;
  o.settled = false;
  const auto poll = refreshToAsk(o);
  ASSERT_TRUE(poll);
  EXPECT_EQ(poll->next, 2);
  EXPECT_EQ(poll->lister, "node-a");

  o.now = kStart + 1min;
  step = refreshStep(o, Json::object(), poll, answered(State::kChanged, 3, 2, 1));
  EXPECT_TRUE(step.newVersion);
  EXPECT_EQ(step.status.at("version").as_number().to_int64(), 2);
  EXPECT_EQ(step.status.at("cacheGeneration").as_number().to_int64(), 2);
  EXPECT_EQ(step.status.at("versionTime").as_string(), kube::metav1Time(o.now));
  EXPECT_EQ(step.status.at("phase").as_string(), "Listing") << "not Ready before the nodes say";
  EXPECT_EQ(conditionOf(step.status, "Ready").reason, "Listing");
  EXPECT_EQ(kube::pathValue(step.status, "refresh.state").as_string(), "Changed");
  EXPECT_EQ(kube::pathValue(step.status, "refresh.added").as_number().to_int64(), 3);
  EXPECT_EQ(kube::pathValue(step.status, "refresh.changed").as_number().to_int64(), 2);
  EXPECT_EQ(kube::pathValue(step.status, "refresh.removed").as_number().to_int64(), 1);
  EXPECT_FALSE(kube::pathValue(step.status, "refresh").has_field("nextVersion"));
  ASSERT_TRUE(step.event);
  EXPECT_FALSE(step.event->warning);
  EXPECT_EQ(step.event->reason, "Refreshed");
  EXPECT_EQ(step.event->message, "version 2: 3 added, 2 changed, 1 removed since version 1");
}

TEST(DatasetRefresh, AFailureKeepsTheVersionAndIsTriedAgainWithBackoff) {
  RefreshObservation o = settled(std::nullopt, "now");
  auto ask = refreshToAsk(o);
  ASSERT_TRUE(ask);
  RefreshStep step = refreshStep(o, Json::object(), ask, answered(State::kFailed));
  EXPECT_FALSE(step.newVersion);
  EXPECT_EQ(step.status.at("version").as_number().to_int64(), 1);
  EXPECT_FALSE(step.status.has_field("cacheGeneration"));
  EXPECT_EQ(kube::pathValue(step.status, "refresh.state").as_string(), "Failed");
  EXPECT_EQ(kube::pathValue(step.status, "refresh.nextTime").as_string(),
            kube::metav1Time(kStart + 30s));
  const Condition failed = conditionOf(step.status, "RefreshFailed");
  EXPECT_TRUE(failed.status);
  EXPECT_EQ(failed.message,
            "the origin could not be listed again: origin unreachable; version 1 still serves; "
            "tried again at " +
                kube::metav1Time(kStart + 30s));
  ASSERT_TRUE(step.event);
  EXPECT_TRUE(step.event->warning);

  o.previous = step.status;
  o.now = kStart + 29s;
  EXPECT_FALSE(refreshToAsk(o));
  o.now = kStart + 30s;
  ask = refreshToAsk(o);
  ASSERT_TRUE(ask);
  // A node that cannot be asked is a failure too; the wait doubles.
  step = refreshStep(o, o.previous, ask, unavailable("node-a: connection refused"));
  EXPECT_EQ(kube::pathValue(step.status, "refresh.failures").as_number().to_int64(), 2);
  EXPECT_EQ(kube::pathValue(step.status, "refresh.nextTime").as_string(),
            kube::metav1Time(kStart + 30s + 60s));

  o.previous = step.status;
  o.now = kStart + 2min;
  step = refreshStep(o, o.previous, refreshToAsk(o), answered(State::kUnchanged));
  EXPECT_FALSE(conditionOf(step.status, "RefreshFailed").status);
  EXPECT_EQ(kube::pathValue(step.status, "refresh.failures").as_number().to_int64(), 0);
  EXPECT_FALSE(kube::pathValue(step.status, "refresh").has_field("nextTime"))
      << "no interval: nothing is due until asked";
}

TEST(DatasetRefresh, FilesGoneFromTheOriginAreNamedWithTheFix) {
  const DatasetEvent event = goneFromOriginEvent(3, {"a.bin", "b/c.bin"});
  EXPECT_TRUE(event.warning);
  EXPECT_EQ(event.reason, "FilesGoneFromOrigin");
  EXPECT_EQ(event.message,
            "version 3 names files the origin no longer has as listed (removed or changed since) "
            "and the cache does not hold, so reads of them fail: a.bin, b/c.bin; a refresh makes "
            "a version without them");
}

TEST(DatasetRefresh, JobsThatHaveNotEndedPinTheVersionsTheyRead) {
  const auto job = [](const std::string& status) {
    return std::make_shared<const Json>(testing::yaml("{status: " + status + "}"));
  };
  EXPECT_EQ(versionsPinnedBy(
                {job("{phase: Running, datasetVersions: {coco: 3, wiki: 9}}"),
                 job("{phase: Restarting, datasetVersions: {coco: 4}}"),
                 job("{phase: Succeeded, datasetVersions: {coco: 1}}"),
                 job("{phase: Failed, datasetVersions: {coco: 2}}"), job("{phase: Pending}")},
                "coco"),
            (std::set<int64_t>{3, 4}));
}

TEST(DatasetRefresh, TheBackoffDoublesUpToTenMinutes) {
  EXPECT_EQ(refreshBackoff(1), 30s);
  EXPECT_EQ(refreshBackoff(2), 60s);
  EXPECT_EQ(refreshBackoff(5), 480s);
  EXPECT_EQ(refreshBackoff(6), 600s);
  EXPECT_EQ(refreshBackoff(50), 600s);
}

TEST(DatasetRefresh, AVersionNumbersPastTheGenerationAndASpecChangeNumbersPastItsVersions) {
  RefreshObservation o = settled(std::nullopt, "now");
  o.version = 4;
  o.generation = 7;  // spec.sharing changed three times: no new cache
  EXPECT_EQ(refreshToAsk(o)->next, 8);

  Json dataset = testing::yaml("{metadata: {generation: 7}, spec: {source: {uri: s3://b/p/}}}");
  const CacheGeneration cache = cacheGenerationOf(dataset);
  dataset["status"] = withCacheGeneration(Json::object(), {9, cache.digest});
  dataset["status"]["refresh"] = testing::yaml("{state: Running, nextVersion: 10}");
  EXPECT_EQ(cacheGenerationOf(dataset).generation, 9) << "a refresh keeps the cache's digest";
  dataset["metadata"]["generation"] = Json::number(8);
  dataset["spec"]["cache"] = testing::yaml("{warm: Never}");
  EXPECT_EQ(cacheGenerationOf(dataset).generation, 11)
      << "a new cache is numbered above the version being made";
}

}  // namespace
}  // namespace granary::op
