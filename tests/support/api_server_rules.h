// What a real kube-apiserver checks and changes on a write, where granary depends on it, for the
// API-server double (api_server_double.h). Pure: JSON in; problems, in the server's words
// ("spec.containers[0].image: Required value"), or a changed object out.
//
// - Custom resources keep only what their structural schema knows: other fields are pruned,
//   or refused under fieldValidation=Strict ("unknown field \"spec.foo\""), except below
//   x-kubernetes-preserve-unknown-fields and additionalProperties.
// - CustomResourceDefinitions are decoded strictly too: a schema key that JSONSchemaProps does
//   not know is an unknown field (what `kubectl apply`, which asks for Strict, is refused).
// - Every object's name and labels are validated as the server validates them.
// - Secrets' stringData is written into data, base64-encoded, and never stored itself.
// - Pods are defaulted (requests from limits, the default ServiceAccount and, as ServiceAccount
//   admission does, its token's projected volume "kube-api-access-*" mounted read-only in every
//   container at /var/run/secrets/kubernetes.io/serviceaccount unless the pod sets
//   automountServiceAccountToken: false or mounts that path itself) and validated:
//   containers, images, env names, volumes and their mounts, and extended resources (such as
//   nvidia.com/gpu), which need a limit equal to their request. A pod's spec cannot change
//   after creation but for images, activeDeadlineSeconds, tolerations and scheduling gates.
#pragma once

#include <string>
#include <vector>

#include "common/kube/object.h"

namespace granary::testing::rules {

// Removes from `object` (a custom resource) what `schema` (its openAPIV3Schema) does not know,
// and returns each removed field's path ("spec.foo", "spec.items[1].bar").
std::vector<std::string> pruneUnknownFields(kube::Json& object, const kube::Json& schema);

// Removes from `crd` the keys apiextensions.k8s.io/v1 does not know, and returns their paths
// ("spec.versions[0].schema.openAPIV3Schema.properties.size.e.g. 1Ti").
std::vector<std::string> pruneUnknownCrdFields(kube::Json& crd);

// How a name of `plural` is validated.
std::vector<std::string> metadataProblems(const kube::Json& object, const std::string& plural);

// Defaults a pod as the server does before validating it.
void defaultPod(kube::Json& pod);
// Moves a Secret's stringData into data (base64), as the server does on every write.
void mergeStringData(kube::Json& secret);
// RFC 4648 base64 of `bytes`, with padding.
std::string base64(const std::string& bytes);
std::vector<std::string> podProblems(const kube::Json& pod);
// What a pod update may not change.
std::vector<std::string> podUpdateProblems(const kube::Json& current, const kube::Json& next);

// The taints the server gives a node without a kubelet, and the node lifecycle controller
// removes once the node reports Ready.
inline constexpr const char* kNotReadyTaint = "node.kubernetes.io/not-ready";
inline constexpr const char* kUnreachableTaint = "node.kubernetes.io/unreachable";
// Adds the not-ready NoSchedule taint to a new node (the TaintNodesByCondition admission).
void taintNewNode(kube::Json& node);

}  // namespace granary::testing::rules
