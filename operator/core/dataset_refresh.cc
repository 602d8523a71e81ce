#include "operator/core/dataset_refresh.h"

#include <algorithm>

#include "operator/core/conditions.h"

namespace granary::op {

using kube::Json;
using State = RefreshAnswer::State;

namespace {

constexpr const char* kRefreshFailed = "RefreshFailed";

int64_t integerAt(const Json& object, const std::string& path) {
  const Json value = kube::pathValue(object, path);
  return value.is_integer() ? value.as_number().to_int64() : 0;
}

std::string stringAt(const Json& object, const std::string& path) {
  const Json value = kube::pathValue(object, path);
  return value.is_string() ? value.as_string() : "";
}

std::optional<std::chrono::system_clock::time_point> timeAt(const Json& object,
                                                            const std::string& path) {
  return kube::parseMetav1Time(stringAt(object, path));
}

bool running(const RefreshObservation& o) {
  return stringAt(o.previous, "refresh.state") == "Running" &&
         integerAt(o.previous, "refresh.nextVersion") > o.version;
}

// When the interval makes the next refresh due: from the last refresh, or since the version
// served was made.
std::optional<std::chrono::system_clock::time_point> intervalDue(const RefreshObservation& o) {
  if (!o.interval) return std::nullopt;
  auto since = timeAt(o.previous, "refresh.lastTime");
  if (!since) since = timeAt(o.previous, "versionTime");
  if (!since) return std::nullopt;  // the first version is not made yet
  return *since + std::chrono::duration_cast<std::chrono::system_clock::duration>(*o.interval);
}

// When the next refresh comes: a failed one's retry, else the interval's; none without either.
std::optional<std::chrono::system_clock::time_point> nextDue(const RefreshObservation& o,
                                                             const Json& refresh) {
  if (refresh.has_string_field("state") && refresh.at("state").as_string() == "Failed")
    return timeAt(refresh, "nextTime");
  RefreshObservation after = o;
  after.previous = Json::object();
  after.previous["refresh"] = refresh;
  return intervalDue(after);
}

// How long until `due` (at least a second); none without one.
std::optional<std::chrono::milliseconds> untilDue(
    const RefreshObservation& o, std::optional<std::chrono::system_clock::time_point> due) {
  if (!due) return std::nullopt;
  return std::max<std::chrono::milliseconds>(
      std::chrono::seconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(*due - o.now));
}

std::string countsOf(const RefreshAnswer& a) {
  return std::to_string(a.added) + " added, " + std::to_string(a.changed) + " changed, " +
         std::to_string(a.removed) + " removed";
}

// `step` moved to version `next`: served to new readers, ensured on the nodes at once, and
// Listing until they report on it.
void makeVersion(const RefreshObservation& o, int64_t next, const RefreshAnswer& answer,
                 RefreshStep& step) {
  Json& status = step.status;
  status["version"] = Json::number(next);
  status["versionTime"] = Json::string(kube::metav1Time(o.now));
  status["cacheGeneration"] = Json::number(next);
  status["phase"] = Json::string("Listing");
  setCondition(
      status["conditions"],
      {"Ready", false, "Listing",
       "version " + std::to_string(next) + " is taken up by the cache nodes (its listing is made)"},
      o.generation, o.now);
  step.newVersion = true;
  step.requeueAfter = std::chrono::milliseconds(1);
  step.event = DatasetEvent{false, "Refreshed",
                            "version " + std::to_string(next) + ": " + countsOf(answer) +
                                " since version " + std::to_string(o.version)};
}

// `refresh` and `step` for a refresh that listed the origin whole.
void listedWhole(const RefreshObservation& o, const RefreshAsk& ask, const RefreshAnswer& answer,
                 Json& refresh, RefreshStep& step) {
  const bool changed = answer.state == State::kChanged;
  refresh["state"] = Json::string(changed ? "Changed" : "Unchanged");
  refresh["added"] = Json::number(answer.added);
  refresh["changed"] = Json::number(answer.changed);
  refresh["removed"] = Json::number(answer.removed);
  refresh["failures"] = Json::number(0);
  if (changed) makeVersion(o, ask.next, answer, step);
  if (conditionOf(step.status, kRefreshFailed).status)
    setCondition(step.status["conditions"],
                 {kRefreshFailed, false, "Refreshed", "the last refresh listed the origin whole"},
                 o.generation, o.now);
}

// `refresh` and `step` for a refresh that failed (`why`): tried again after the backoff.
void failed(const RefreshObservation& o, const std::string& why, Json& refresh, RefreshStep& step) {
  const int failures = static_cast<int>(integerAt(refresh, "failures")) + 1;
  const auto retry = o.now + refreshBackoff(failures);
  refresh["state"] = Json::string("Failed");
  refresh["failures"] = Json::number(failures);
  refresh["message"] = Json::string(why);
  refresh["nextTime"] = Json::string(kube::metav1Time(retry));
  const std::string message = "the origin could not be listed again: " + why + "; version " +
                              std::to_string(o.version) + " still serves; tried again at " +
                              kube::metav1Time(retry);
  step.event = DatasetEvent{true, kRefreshFailed, message};
  setCondition(step.status["conditions"], {kRefreshFailed, true, "OriginFailed", message},
               o.generation, o.now);
}

// `status` with the version served and since when.
Json withVersion(const RefreshObservation& o, Json status) {
  const bool same = integerAt(o.previous, "version") == o.version;
  const std::string since = stringAt(o.previous, "versionTime");
  status["version"] = Json::number(o.version);
  status["versionTime"] = Json::string(same && !since.empty() ? since : kube::metav1Time(o.now));
  return status;
}

}  // namespace

DatasetEvent goneFromOriginEvent(int64_t version, const std::vector<std::string>& paths) {
  std::string named;
  for (const auto& path : paths) named += (named.empty() ? "" : ", ") + path;
  return {true, "FilesGoneFromOrigin",
          "version " + std::to_string(version) + " names files the origin no longer has as " +
              "listed (removed or changed since) and the cache does not hold, so reads of them " +
              "fail: " + named + "; a refresh makes a version without them"};
}

std::set<int64_t> versionsPinnedBy(const std::vector<kube::ObjectPtr>& jobs,
                                   const std::string& name) {
  std::set<int64_t> pinned;
  for (const auto& job : jobs) {
    const std::string phase = stringAt(*job, "status.phase");
    if (phase == "Succeeded" || phase == "Failed") continue;
    const Json versions = kube::pathValue(*job, "status.datasetVersions");
    if (versions.is_object() && versions.has_integer_field(name))
      pinned.insert(versions.at(name).as_number().to_int64());
  }
  return pinned;
}

std::chrono::seconds refreshBackoff(int failures) {
  const int doublings = std::clamp(failures - 1, 0, 5);
  return std::min<std::chrono::seconds>(std::chrono::seconds(30) * (1 << doublings),
                                        std::chrono::minutes(10));
}

std::optional<RefreshAsk> refreshToAsk(const RefreshObservation& o) {
  if (running(o))
    return RefreshAsk{integerAt(o.previous, "refresh.nextVersion"),
                      stringAt(o.previous, "refresh.lister")};
  if (!o.settled) return std::nullopt;
  const RefreshAsk fresh{std::max(o.version, o.generation) + 1, ""};
  if (!o.requested.empty() && o.requested != stringAt(o.previous, "refresh.observedRequest"))
    return fresh;
  const Json refresh = kube::pathValue(o.previous, "refresh");
  std::optional<std::chrono::system_clock::time_point> due =
      refresh.is_object() ? nextDue(o, refresh) : intervalDue(o);
  if (due && o.now >= *due) return fresh;
  return std::nullopt;
}

RefreshStep refreshStep(const RefreshObservation& o, Json status,
                        const std::optional<RefreshAsk>& ask, const Result<RefreshAnswer>& answer) {
  RefreshStep step{.status = withVersion(o, std::move(status))};
  Json refresh = kube::pathValue(o.previous, "refresh");
  // Just started: nothing is written yet, so that a refresh over by the next look (most) makes
  // one status write, of its outcome. It is asked again then, as it is still due.
  const bool inProgress = answer.isOk() && answer->state == State::kRunning;
  if (!ask || (inProgress && answer->started)) {
    if (refresh.is_object()) step.status["refresh"] = refresh;
    if (ask)
      step.requeueAfter = std::chrono::seconds(1);
    else if (o.settled)  // unsettled, the plan looks again soon enough
      step.requeueAfter = untilDue(o, refresh.is_object() ? nextDue(o, refresh) : intervalDue(o));
    return step;
  }
  if (!refresh.is_object()) refresh = Json::object();
  for (const char* field : {"nextVersion", "lister", "message", "listedFiles"})
    kube::eraseField(refresh, field);
  if (inProgress) {
    refresh["state"] = Json::string("Running");
    refresh["nextVersion"] = Json::number(ask->next);
    refresh["lister"] = Json::string(answer->lister);
    refresh["listedFiles"] = Json::number(answer->listed);
    step.requeueAfter = std::chrono::seconds(5);
  } else {
    refresh["lastTime"] = Json::string(kube::metav1Time(o.now));
    refresh["observedRequest"] = Json::string(o.requested);
    if (answer.isOk() && answer->state != State::kFailed)
      listedWhole(o, *ask, *answer, refresh, step);
    else
      failed(o, answer.isOk() ? answer->message : answer.status().message(), refresh, step);
  }
  if (refresh.at("state").as_string() != "Failed") {
    kube::eraseField(refresh, "nextTime");
    if (const auto due = nextDue(o, refresh))
      refresh["nextTime"] = Json::string(kube::metav1Time(*due));
  }
  if (!step.requeueAfter) step.requeueAfter = untilDue(o, timeAt(refresh, "nextTime"));
  step.status["refresh"] = refresh;
  return step;
}

}  // namespace granary::op
