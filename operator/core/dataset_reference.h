// The reconcile of a Dataset that refers to another (spec.source.uri dataset://), as a pure
// function: from the referring Dataset and its source as the informers hold them, to whether the
// view is served, on which nodes, and the status to write. A reference is served only while its
// source exists, names an origin itself and offers itself to the reference's namespace
// (spec.sharing.namespaces); its status is then the source's, and it has no cache of its own.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/api/dataset.h"
#include "common/kube/object.h"
#include "operator/core/dataset_plan.h"

namespace granary::op {

struct ReferenceObservation {
  std::string ns;  // the referring Dataset's namespace
  int64_t generation = 0;
  api::DatasetReference reference;
  // The source as the informer holds it; null when there is none of that name, or it is being
  // deleted.
  const kube::Json* source = nullptr;
  kube::Json previousStatus;  // the referring Dataset's status (null when none)
  std::chrono::system_clock::time_point now;
};

struct ReferencePlan {
  // Ensure the view on `nodes` (the nodes the source's status lists); otherwise drop it from
  // every node, so that no new pod mounts it (pods that mounted it keep reading).
  bool serve = false;
  std::vector<std::string> nodes;
  kube::Json status;
  std::optional<DatasetEvent> event;  // when the phase or the Ready reason changes
  // When to look again: pollReady once settled or Failed (a change of the source wakes it
  // sooner), pollWarming otherwise.
  std::chrono::milliseconds requeueAfter{0};
};

ReferencePlan planReference(const ReferenceObservation& observation,
                            const DatasetPlanOptions& options = {});

// The reasons a reference is refused (its Ready condition's reason).
inline constexpr const char* kSourceNotFound = "SourceNotFound";
inline constexpr const char* kSourceIsReference = "SourceIsReference";
inline constexpr const char* kSourceInvalid = "SourceInvalid";
inline constexpr const char* kNotOffered = "NotOffered";
inline constexpr const char* kOfferWithdrawn = "OfferWithdrawn";

// The spec of a Dataset object, decoded (defaults applied, every rule checked).
Result<api::Dataset> decodeDataset(const kube::Json& object);

// "namespace/name" of the Dataset a Dataset object refers to (spec.source.uri dataset://); ""
// for one that names an origin, or a URI that is not valid.
std::string sourceKeyOf(const kube::Json& dataset);

// "namespace/name" of the Datasets in `datasets` that refer to `source` and are offered to,
// sorted: what the source's status.referredBy lists.
std::vector<std::string> referrersOffered(const kube::Json& source,
                                          const std::vector<kube::ObjectPtr>& datasets);

// `status` listing `referrers` in status.referredBy (none: no field).
kube::Json withReferrers(kube::Json status, const std::vector<std::string>& referrers);

}  // namespace granary::op
