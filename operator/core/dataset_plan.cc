#include "operator/core/dataset_plan.h"

#include <set>

#include "operator/core/conditions.h"

namespace granary::op {

using kube::Json;

namespace {

bool namesSecrets(const api::Dataset& dataset) {
  for (const auto& mount : dataset.spec.mounts)
    if (mount.source.secretRef) return true;
  return false;
}

// A Warning for phases that need someone (or a setting) to act.
bool isWarning(DatasetPhase phase, const std::string& reason) {
  return phase == DatasetPhase::kFailed || phase == DatasetPhase::kDegraded ||
         phase == DatasetPhase::kQuotaFull ||
         (phase == DatasetPhase::kPending && reason != "Pending");
}

}  // namespace

std::optional<DatasetEvent> datasetEventFor(const Json& previous, const Json& status) {
  const std::optional<DatasetPhase> before = phaseOfStatus(previous);
  const std::optional<DatasetPhase> after = phaseOfStatus(status);
  const Condition was = conditionOf(previous, "Ready");
  const Condition ready = conditionOf(status, "Ready");
  if (!after || (before == after && was.reason == ready.reason)) return std::nullopt;
  return DatasetEvent{isWarning(*after, ready.reason), ready.reason, ready.message};
}

bool isSettled(DatasetPhase phase) {
  return phase == DatasetPhase::kReady || phase == DatasetPhase::kOnDemand ||
         phase == DatasetPhase::kQuotaFull;
}

namespace {

// A status the nodes could not give (bad spec, no node, a Secret): polled three times slower.
DatasetPlan problem(DatasetPlan plan, const DatasetObservation& o, DatasetPhase phase,
                    const std::string& reason, const std::string& message,
                    const DatasetPlanOptions& options) {
  plan.status = problemStatus(o.previousStatus, o.generation, phase, reason, message, o.now);
  plan.requeueAfter = options.pollWarming * 3;
  return plan;
}

// Per node of the set: what to ask of it, and its report for the status.
NodeReport planNode(const CacheNode& node, const NodeAnswer& answer, bool hasReaders,
                    const DatasetPlanOptions& options, DatasetPlan& plan) {
  NodeReport report{.nodeName = node.node.name};
  const bool held = answer.status.isOk();
  if (!held && answer.status.status().code() != StatusCode::kNotFound) {
    report.error = answer.status.status().message();
    plan.forget.push_back(node.address);
    return report;
  }
  const bool fresh = answer.ensuredAgo && *answer.ensuredAgo < options.reensureInterval;
  const bool ensure = !held || !fresh;
  if (ensure) plan.ensure.push_back(node);
  // An ensure leaves the node without readers: tell it again when there are any.
  if (ensure ? hasReaders : !answer.readersAnnounced) plan.announceReaders.push_back(node);
  // A node not holding it yet lists it once ensured (kPending with a message says what a node
  // awaits).
  report.progress =
      held ? *answer.status
           : NodeProgress{.phase = DatasetPhase::kListing, .message = "not ensured yet"};
  return report;
}

}  // namespace

DatasetPlan planDataset(const DatasetObservation& o, const DatasetPlanOptions& options) {
  DatasetPlan plan;
  if (!o.dataset.isOk()) {
    plan = problem(std::move(plan), o, DatasetPhase::kFailed, "InvalidSpec",
                   o.dataset.status().message(), options);
    plan.requeueAfter = {};
    plan.terminal = o.dataset.status();
    plan.event = datasetEventFor(o.previousStatus, plan.status);
    return plan;
  }
  const api::Dataset& dataset = *o.dataset;
  const NodeSetPlan& set = o.set;
  plan.purge = set.departed;
  if (set.nodes.empty()) {
    std::string why;
    for (const auto& [node, reason] : set.excluded) why += "; " + node + ": " + reason;
    plan = problem(std::move(plan), o, DatasetPhase::kPending, "NoCacheNodes",
                   "no granary-cache-node may hold this dataset" + why, options);
    plan.event = datasetEventFor(o.previousStatus, plan.status);
    return plan;
  }

  DatasetProgress progress{.generation = o.generation, .cache = dataset.spec.cache};
  for (const auto& node : set.nodes) {
    const auto it = o.answers.find(node.node.name);
    const NodeAnswer unasked{.status = unavailable("not asked")};
    progress.reports.push_back(
        planNode(node, it == o.answers.end() ? unasked : it->second, o.hasReaders, options, plan));
  }
  progress.replanned = !plan.ensure.empty();

  if (!plan.ensure.empty() && namesSecrets(dataset)) {
    if (!o.credentials) return {.readCredentials = true};
    if (!o.credentials->isOk()) {
      const bool missing = o.credentials->code() == StatusCode::kNotFound;
      const std::string reason = missing ? "SecretNotFound" : "InvalidSecret";
      plan.ensure.clear();
      plan.announceReaders.clear();
      plan = problem(std::move(plan), o, DatasetPhase::kPending, reason, o.credentials->message(),
                     options);
      // Said every time: the Secret is what a person must fix (repeats are aggregated).
      plan.event = DatasetEvent{true, reason, o.credentials->message()};
      return plan;
    }
  }

  plan.status = datasetStatus(progress, o.previousStatus, o.now);
  for (const auto& report : progress.reports)
    if (report.progress)
      for (const auto& pod : report.progress->cutOff)
        plan.cutOff.emplace_back(report.nodeName, pod);
  const std::optional<DatasetPhase> phase = phaseOfStatus(plan.status);
  plan.requeueAfter = phase && isSettled(*phase) ? options.pollReady : options.pollWarming;
  plan.event = datasetEventFor(o.previousStatus, plan.status);
  return plan;
}

}  // namespace granary::op
