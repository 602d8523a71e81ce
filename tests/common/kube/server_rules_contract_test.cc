// What a real API server checks and changes on a write, where granary depends on it: strict
// field validation and pruning of custom resources and CRDs, pod validation and defaulting, the
// not-ready taint of a new node, the default ServiceAccount, and a namespace that stays
// Terminating while an object in it has a finalizer. Against the API-server double, or a real
// cluster with GRANARY_TEST_KUBECONFIG (one with a controller manager: the namespace and the
// service-account controllers do part of this there): the same tests, the same expectations.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/config.h"
#include "common/kube/client.h"
#include "common/kube/yaml_json.h"
#include "tests/support/cluster.h"

namespace granary::testing {
namespace {

using kube::Json;
namespace resources = kube::resources;
using namespace std::chrono_literals;

const kube::ResourceType kServiceAccounts{"", "v1", "serviceaccounts", "ServiceAccount", true};
const kube::ResourceType kConfigMaps{"", "v1", "configmaps", "ConfigMap", true};

class ServerRulesContract : public ClusterTest {
 protected:
  Json pod(const std::string& name, const std::string& containers) {
    return yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: " + name +
                "}\nspec:\n  containers: " + containers);
  }
  // The write's error message, "" when it succeeded.
  static std::string refusal(const Result<Json>& written) {
    return written.isOk() ? "" : written.status().message();
  }
};

TEST_F(ServerRulesContract, AnUnknownFieldIsRefusedUnderStrictValidationAndPrunedOtherwise) {
  const Json withUnknown = yaml(
      "apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: coco}\n"
      "spec: {source: {uri: \"s3://bucket/coco/\", endpiont: \"http://typo\"}, colour: blue}");
  auto strict =
      client().create(resources::datasets(), ns(), withUnknown, {.fieldValidation = "Strict"});
  ASSERT_FALSE(strict.isOk());
  EXPECT_EQ(strict.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refusal(strict).find("unknown field \"spec.colour\""), std::string::npos)
      << strict.status();
  EXPECT_NE(refusal(strict).find("unknown field \"spec.source.endpiont\""), std::string::npos)
      << strict.status();

  auto lenient = client().create(resources::datasets(), ns(), withUnknown);
  ASSERT_TRUE(lenient.isOk()) << lenient.status();
  EXPECT_FALSE(lenient->at("spec").has_field("colour")) << lenient->serialize();
  EXPECT_FALSE(lenient->at("spec").at("source").has_field("endpiont")) << lenient->serialize();
  EXPECT_EQ(lenient->at("spec").at("source").at("uri").as_string(), "s3://bucket/coco/");

  // An update is held to the same rules.
  Json changed = *lenient;
  changed["spec"]["colour"] = Json::string("red");
  auto update = client().update(resources::datasets(), changed, {.fieldValidation = "Strict"});
  EXPECT_NE(refusal(update).find("unknown field \"spec.colour\""), std::string::npos)
      << update.status();
}

TEST_F(ServerRulesContract, WhatTheSchemaPreservesIsKept) {
  // A TrainingJob's pod template is kept as written (x-kubernetes-preserve-unknown-fields).
  auto created = client().create(
      resources::trainingJobs(), ns(),
      yaml("apiVersion: granary.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: bert}\n"
           "spec:\n  datasets: [{name: coco, mountPath: /data}]\n"
           "  template: {spec: {priorityClassName: high, containers: [{name: t, image: pytorch, "
           "stdin: true}]}}"),
      {.fieldValidation = "Strict"});
  ASSERT_TRUE(created.isOk()) << created.status();
  EXPECT_EQ(kube::pathValue(*created, "spec.template.spec.priorityClassName").as_string(), "high");
  EXPECT_TRUE(
      kube::pathValue(*created, "spec.template.spec.containers").at(0).at("stdin").as_bool());
}

TEST_F(ServerRulesContract, ACrdWithAKeyJsonSchemaPropsDoesNotKnowIsRefusedUnderStrict) {
  // A wrapped description that YAML read as a key, as in a Dataset CRD that once shipped.
  const std::string group = "contract.granary.io";
  const std::string plural = "widgets" + ns().substr(ns().rfind('-') + 1);
  auto created = client().create(
      resources::customResourceDefinitions(), "",
      yaml("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
           "metadata: {name: " +
           plural + "." + group +
           "}\n"
           "spec:\n  group: " +
           group +
           "\n  scope: Namespaced\n"
           "  names: {plural: " +
           plural +
           ", singular: widget, kind: Widget}\n"
           "  versions:\n  - name: v1\n    served: true\n    storage: true\n"
           "    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n"
           "          size:\n            type: string\n            description: How big, as in\n"
           "            e.g. 1Ti: a quantity\n"),
      {.fieldValidation = "Strict"});
  ASSERT_FALSE(created.isOk()) << "a CRD with a stray key was installed";
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refusal(created).find("unknown field "
                                  "\"spec.versions[0].schema.openAPIV3Schema.properties.size.e.g. "
                                  "1Ti\""),
            std::string::npos)
      << created.status();
}

TEST_F(ServerRulesContract, AnExtendedResourceNeedsALimitEqualToItsRequest) {
  auto requestOnly = client().create(
      resources::pods(), ns(),
      pod("request-only",
          "[{name: t, image: busybox, resources: {requests: {nvidia.com/gpu: \"1\"}}}]"));
  EXPECT_EQ(requestOnly.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refusal(requestOnly)
                .find("spec.containers[0].resources.limits: Required value: Limit must be set "
                      "for non overcommitable resources"),
            std::string::npos)
      << requestOnly.status();

  auto unequal = client().create(
      resources::pods(), ns(),
      pod("unequal",
          "[{name: t, image: busybox, resources: {requests: {nvidia.com/gpu: \"2\"}, "
          "limits: {nvidia.com/gpu: \"1\"}}}]"));
  EXPECT_EQ(unequal.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refusal(unequal).find("spec.containers[0].resources.requests"), std::string::npos)
      << unequal.status();

  // A limit alone is the request too.
  auto limitOnly = client().create(
      resources::pods(), ns(),
      pod("limit-only",
          "[{name: t, image: busybox, resources: {limits: {nvidia.com/gpu: \"2\", cpu: \"1\"}}}]"));
  ASSERT_TRUE(limitOnly.isOk()) << limitOnly.status();
  const Json requests =
      kube::pathValue(*limitOnly, "spec.containers").at(0).at("resources").at("requests");
  EXPECT_EQ(requests.at("nvidia.com/gpu").as_string(), "2") << limitOnly->serialize();
  EXPECT_EQ(requests.at("cpu").as_string(), "1") << limitOnly->serialize();
}

TEST_F(ServerRulesContract, APodsNamesLabelsVolumesAndEnvAreValidated) {
  auto bad = client().create(
      resources::pods(), ns(),
      yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: bad, labels: {granary.io/job-name: "
           "\"not a label!\"}}\nspec:\n  volumes: [{name: data, emptyDir: {}}]\n"
           "  containers:\n  - {name: t, image: busybox, env: [{name: 1BAD, value: x}],\n"
           "     volumeMounts: [{name: missing, mountPath: /m}]}\n"
           "  - {name: t, image: busybox}\n"));
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  for (const char* field : {"metadata.labels", "spec.containers[0].env[0].name",
                            "spec.containers[0].volumeMounts[0].name", "spec.containers[1].name"})
    EXPECT_NE(refusal(bad).find(field), std::string::npos) << field << " in " << bad.status();

  auto noImage = client().create(resources::pods(), ns(), pod("no-image", "[{name: t}]"));
  EXPECT_NE(refusal(noImage).find("spec.containers[0].image: Required value"), std::string::npos)
      << noImage.status();
  auto badName =
      client().create(resources::pods(), ns(), pod("Not_A_Name", "[{name: t, image: busybox}]"));
  EXPECT_NE(refusal(badName).find("metadata.name"), std::string::npos) << badName.status();
}

TEST_F(ServerRulesContract, APodsSpecStaysAsCreatedButForItsImages) {
  auto created =
      client().create(resources::pods(), ns(),
                      pod("fixed", "[{name: t, image: busybox, command: [sleep, \"1\"]}]"));
  ASSERT_TRUE(created.isOk()) << created.status();
  EXPECT_EQ(kube::pathValue(*created, "spec.serviceAccountName").as_string(), "default");
  auto image = edit(client(), resources::pods(), ns(), "fixed",
                    [](Json& p) { p["spec"]["containers"][0]["image"] = Json::string("alpine"); });
  EXPECT_TRUE(image.isOk()) << image.status();
  auto command = edit(client(), resources::pods(), ns(), "fixed", [](Json& p) {
    p["spec"]["containers"][0]["command"][1] = Json::string("2");
  });
  EXPECT_EQ(command.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refusal(command).find("spec: Forbidden: pod updates may not change fields"),
            std::string::npos)
      << command.status();
}

TEST_F(ServerRulesContract, PodsNeedTheirServiceAccount) {
  // The namespace got its default ServiceAccount (ClusterTest waits for it).
  EXPECT_TRUE(client().get(kServiceAccounts, ns(), "default").isOk());
  Json missing = pod("orphan", "[{name: t, image: busybox}]");
  missing["spec"]["serviceAccountName"] = Json::string("nobody");
  auto created = client().create(resources::pods(), ns(), missing);
  EXPECT_EQ(created.status().code(), StatusCode::kPermissionDenied) << created.status();
  EXPECT_NE(refusal(created).find("serviceaccount \"nobody\" not found"), std::string::npos)
      << created.status();
}

// ServiceAccount admission: the account's token, the cluster's CA and the namespace in a projected
// volume, mounted read-only in every container, unless the pod opts out. Tests that look at a
// pod's volumes count their own, never all of them.
TEST_F(ServerRulesContract, ServiceAccountAdmissionMountsTheTokensProjectedVolume) {
  Json withVolume =
      pod("with-token", "[{name: t, image: busybox, volumeMounts: [{name: own, mountPath: /d}]}]");
  withVolume["spec"]["volumes"] = yaml("[{name: own, emptyDir: {}}]");
  auto created = client().create(resources::pods(), ns(), withVolume);
  ASSERT_TRUE(created.isOk()) << created.status();
  const Json volumes = kube::pathValue(*created, "spec.volumes");
  ASSERT_EQ(volumes.size(), 2u) << created->serialize();
  EXPECT_EQ(volumes.at(0).at("name").as_string(), "own") << "the pod's own volumes come first";
  const std::string name = volumes.at(1).at("name").as_string();
  EXPECT_TRUE(name.starts_with("kube-api-access-")) << name;
  EXPECT_TRUE(volumes.at(1).has_object_field("projected"));
  const Json mounts = kube::pathValue(*created, "spec.containers").at(0).at("volumeMounts");
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts.at(1).at("name").as_string(), name);
  EXPECT_EQ(mounts.at(1).at("mountPath").as_string(),
            "/var/run/secrets/kubernetes.io/serviceaccount");
  EXPECT_TRUE(mounts.at(1).at("readOnly").as_bool());

  Json without = pod("without-token", "[{name: t, image: busybox}]");
  without["spec"]["automountServiceAccountToken"] = Json::boolean(false);
  auto optedOut = client().create(resources::pods(), ns(), without);
  ASSERT_TRUE(optedOut.isOk()) << optedOut.status();
  EXPECT_FALSE(kube::pathValue(*optedOut, "spec.volumes").is_array() &&
               kube::pathValue(*optedOut, "spec.volumes").size() > 0)
      << optedOut->serialize();
}

// A Secret written with stringData reads back with each value base64-encoded in data, and no
// stringData (what the operator's rendezvous token Secrets rely on).
TEST_F(ServerRulesContract, ASecretsStringDataIsStoredInDataBase64Encoded) {
  auto created = client().create(
      resources::secrets(), ns(),
      yaml("metadata: {name: token}\ntype: Opaque\nstringData: {notice-token: ab12, other: x}\n"
           "data: {kept: aGk=}"));
  ASSERT_TRUE(created.isOk()) << created.status();
  auto read = client().get(resources::secrets(), ns(), "token");
  ASSERT_TRUE(read.isOk()) << read.status();
  EXPECT_EQ(kube::pathValue(*read, "data.notice-token").as_string(), "YWIxMg==");
  EXPECT_EQ(kube::pathValue(*read, "data.other").as_string(), "eA==");
  EXPECT_EQ(kube::pathValue(*read, "data.kept").as_string(), "aGk=");
  EXPECT_TRUE(kube::pathValue(*read, "stringData").is_null()) << read->serialize();
  auto only = client().create(resources::secrets(), ns(),
                              yaml("metadata: {name: only-string-data}\nstringData: {k: v}"));
  ASSERT_TRUE(only.isOk()) << only.status();
  EXPECT_EQ(kube::pathValue(*only, "data.k").as_string(), "dg==");
}

TEST_F(ServerRulesContract, ANewNodeIsNotReadyAndTaintedUntilItsKubeletSpeaks) {
  const std::string name = "contract-" + ns().substr(ns().rfind('-') + 1);
  {
    auto created = client().create(resources::nodes(), "", yaml("metadata: {name: " + name + "}"));
    ASSERT_TRUE(created.isOk()) << created.status();
    bool tainted = false;
    const Json taints = kube::pathValue(*created, "spec.taints");
    for (size_t i = 0; taints.is_array() && i < taints.size(); ++i)
      tainted = tainted || (taints.at(i).at("key").as_string() == "node.kubernetes.io/not-ready" &&
                            taints.at(i).at("effect").as_string() == "NoSchedule");
    EXPECT_TRUE(tainted) << created->serialize();
    ASSERT_TRUE(client().remove(resources::nodes(), "", name).isOk());
    ASSERT_TRUE(eventually(
        [&] {
          return client().get(resources::nodes(), "", name).status().code() ==
                 StatusCode::kNotFound;
        },
        30s));
  }
  TestNode node(client(), name);  // heartbeats, as a kubelet's
  ASSERT_TRUE(node.status().isOk()) << node.status();
  auto got = client().get(resources::nodes(), "", name);
  ASSERT_TRUE(got.isOk()) << got.status();
  const Json taints = kube::pathValue(*got, "spec.taints");
  EXPECT_TRUE(!taints.is_array() || taints.size() == 0) << got->serialize();
  EXPECT_EQ(kube::pathValue(*got, "status.conditions").at(0).at("status").as_string(), "True");
  EXPECT_TRUE(client().get(resources::leases(), "kube-node-lease", name).isOk());
}

TEST_F(ServerRulesContract, ANamespaceStaysTerminatingWhileAnObjectInItHasAFinalizer) {
  auto doomed = cluster_->createNamespace();
  ASSERT_TRUE(doomed.isOk()) << doomed.status();
  const std::string gone = *doomed;
  ASSERT_TRUE(client()
                  .create(resources::datasets(), gone,
                          yaml("apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: "
                               "held, finalizers: [contract.granary.io/hold]}\n"
                               "spec: {source: {uri: \"s3://bucket/held/\"}}"))
                  .isOk());
  ASSERT_TRUE(client().remove(resources::namespaces(), "", gone).isOk());

  auto terminating = client().get(resources::namespaces(), "", gone);
  ASSERT_TRUE(terminating.isOk()) << "the namespace waits for the finalizer";
  EXPECT_FALSE(kube::pathValue(*terminating, "metadata.deletionTimestamp").is_null());
  auto late = client().create(kConfigMaps, gone, yaml("metadata: {name: late}"));
  EXPECT_EQ(late.status().code(), StatusCode::kPermissionDenied) << late.status();
  EXPECT_NE(refusal(late).find("being terminated"), std::string::npos) << late.status();
  // Its content is deleted: the object with a finalizer waits, marked.
  ASSERT_TRUE(eventually(
      [&] {
        auto held = client().get(resources::datasets(), gone, "held");
        return held.isOk() && !kube::pathValue(*held, "metadata.deletionTimestamp").is_null();
      },
      60s));
  EXPECT_TRUE(client().get(resources::namespaces(), "", gone).isOk());

  ASSERT_TRUE(
      client()
          .mergePatch(resources::datasets(), gone, "held", yaml("metadata: {finalizers: null}"))
          .isOk());
  EXPECT_TRUE(eventually(
      [&] {
        return client().get(resources::namespaces(), "", gone).status().code() ==
               StatusCode::kNotFound;
      },
      60s))
      << "the namespace goes once it is empty";
}

// What `kubectl apply --dry-run=server` does with every example a user is shown: each object is
// admitted, strictly validated, and nothing is stored.
TEST_F(ServerRulesContract, EveryExampleIsAcceptedByTheServer) {
  int checked = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           std::filesystem::path(GRANARY_SOURCE_DIR) / "examples")) {
    if (entry.path().extension() != ".yaml") continue;
    auto documents = config::loadFile(entry.path());
    ASSERT_TRUE(documents.isOk()) << documents.status();
    for (const auto& document : *documents) {
      Json object = kube::toJson(document);
      const std::string kind = object.at("kind").as_string();
      const kube::ResourceType* type = kind == "Dataset"       ? &resources::datasets()
                                       : kind == "TrainingJob" ? &resources::trainingJobs()
                                       : kind == "Secret"      ? &resources::secrets()
                                                               : nullptr;
      ASSERT_NE(type, nullptr) << entry.path() << ": an example of kind " << kind;
      kube::eraseField(object["metadata"], "namespace");  // into the test's own
      auto accepted =
          client().create(*type, ns(), object, {.fieldValidation = "Strict", .dryRun = true});
      EXPECT_TRUE(accepted.isOk()) << entry.path() << ": " << accepted.status();
      ++checked;
    }
  }
  EXPECT_GE(checked, 10);
  auto stored = client().list(resources::datasets(), ns());
  ASSERT_TRUE(stored.isOk());
  EXPECT_TRUE(stored->items.empty()) << "a dry run stores nothing";
}

}  // namespace
}  // namespace granary::testing
