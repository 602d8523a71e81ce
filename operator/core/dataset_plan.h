// The Dataset reconcile's pure core (planDataset): from what the controller observed — the
// decoded Dataset, its node set, what each node of the dataset's set reports and what the
// controller last told it — to what it does next: which nodes to ensure, tell the readers or
// purge, the status to write, the Event that goes with it and when to look again. The controller
// (operator/dataset_controller.h) observes and applies; nothing here does I/O.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/api/dataset.h"
#include "common/kube/object.h"
#include "common/result.h"
#include "operator/core/dataset_status.h"
#include "operator/core/node_set.h"

namespace granary::op {

// What one node of the set said, and what the controller last told it.
struct NodeAnswer {
  // GetDatasetStatus of this generation: its progress, NotFound when the node does not hold it
  // (never ensured, or restarted empty), any other error when it cannot be reached.
  Result<NodeProgress> status = notFound("not asked");
  // How long ago the node accepted the current EnsureDataset request (same spec, same node
  // set); unset when it never did, or the request changed since.
  std::optional<std::chrono::milliseconds> ensuredAgo;
  // The node holds the dataset's current readers (SetWarmPlan).
  bool readersAnnounced = false;
};

struct DatasetObservation {
  int64_t generation = 0;  // metadata.generation
  // Decoded once, by the adapter; an error names the invalid field.
  Result<api::Dataset> dataset = invalidArgument("spec: not decoded");
  kube::Json previousStatus;  // the object's status (null when none)
  // The dataset's cache nodes: planNodeSet over every cache node discovered (unused when the
  // dataset could not be decoded).
  NodeSetPlan set;
  std::map<std::string, NodeAnswer> answers;  // by node name, for the nodes of the set
  // The dataset's Secrets: unset while not read (read only when a node is to be ensured),
  // OK once read, otherwise why they could not be (NotFound: a Secret is missing).
  std::optional<Status> credentials;
  bool hasReaders = false;  // TrainingJob workers placed that mount it
  std::chrono::system_clock::time_point now;
};

struct DatasetPlanOptions {
  // Looks at a Dataset while it is not settled, and once it is (Ready, OnDemand, QuotaFull).
  std::chrono::milliseconds pollWarming{5'000};
  std::chrono::milliseconds pollReady{30'000};
  // Ensures again at least this often, so rotated credentials reach the nodes.
  std::chrono::milliseconds reensureInterval{600'000};
};

struct DatasetEvent {
  bool warning = false;
  std::string reason, message;
};

struct DatasetPlan {
  // Read the Secrets, then plan again: a node is to be ensured and the dataset names Secrets
  // not yet read. Nothing else in the plan is meaningful then.
  bool readCredentials = false;
  // Nodes to send EnsureDataset (with the credentials); each then drops the dataset's other
  // generations.
  std::vector<CacheNode> ensure;
  // Nodes to send SetWarmPlan with the current readers (after any ensure of the same node).
  std::vector<CacheNode> announceReaders;
  // Nodes the dataset left (healthy cache nodes its rules now exclude, listed in its status):
  // every generation of the dataset is purged from them.
  std::vector<CacheNode> purge;
  // Nodes that could not be asked: they may restart empty, so the controller forgets what
  // it told them.
  std::vector<std::string> forget;    // addresses
  kube::Json status;                  // the status to write when it differs from the object's
  std::optional<DatasetEvent> event;  // recorded once the status is written
  // Pods whose view of the dataset ended, by node: each is to be marked (names::
  // kMountLostAnnotation) and named in an Event, once.
  std::vector<std::pair<std::string, CutOffPod>> cutOff;  // (node, pod)
  // When to look again; zero with `terminal` set: not until the object changes.
  std::chrono::milliseconds requeueAfter{0};
  std::optional<Status> terminal;  // the spec is invalid: no retry helps
};

DatasetPlan planDataset(const DatasetObservation& observation,
                        const DatasetPlanOptions& options = {});

// Whether a Dataset in `phase` has settled (Ready, OnDemand, QuotaFull): polled every pollReady.
bool isSettled(DatasetPhase phase);
// The Event when `status` changes the phase or the Ready condition's reason of `previous`: a
// Warning for phases that need someone, or a setting, to act.
std::optional<DatasetEvent> datasetEventFor(const kube::Json& previous, const kube::Json& status);

}  // namespace granary::op
