// The requests the Dataset controller sends a cache node: EnsureDataset for a Dataset
// generation on its node set, and SetWarmPlan with the dataset's readers. Pure.
#pragma once

#include <map>
#include <string>

#include "common/api/dataset.h"
#include "common/kube/object.h"
#include "common/secret.h"
#include "granary/v1/cache_node.pb.h"
#include "operator/core/node_set.h"
#include "operator/core/readers.h"

namespace granary::op {

// The keys of a Dataset's Secret (spec.source.secretRef / spec.mounts[].source.secretRef).
struct OriginCredentials {
  Secret accessKeyId, secretAccessKey, sessionToken;  // s3
  Secret token;                                       // http(s): a bearer token
};

// `credentials` by mount name, for the mounts that reference a Secret.
v1::EnsureDatasetRequest ensureRequestOf(
    const api::Dataset& dataset, const std::map<std::string, OriginCredentials>& credentials,
    const NodeSetPlan& plan);

// A node's refusal of an EnsureDataset, in the Dataset's terms: "mounts[i]." (the request's
// field) becomes "spec.source." for a Dataset with one `source`, "spec.mounts[i]." otherwise.
std::string inSpecTerms(const std::string& rejection, const api::Dataset& dataset);

v1::DatasetRef refOf(const api::ObjectMeta& metadata);

v1::SetWarmPlanRequest warmPlanRequestOf(const v1::DatasetRef& dataset,
                                         const std::vector<DatasetReader>& readers);

// Reads the credential keys of a Secret object (base64 `data`, or `stringData`).
// InvalidArgument naming the Secret when it holds none of the keys.
Result<OriginCredentials> credentialsOf(const kube::Json& secret);

}  // namespace granary::op
