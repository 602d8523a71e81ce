#include "common/api/manifest.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace granary::api {
namespace {

Result<Object> decodeText(std::string_view text) {
  GRANARY_ASSIGN_OR_RETURN(auto node, config::parse(text, "test.yaml"));
  return decodeObject(node);
}

TEST(Manifest, DatasetDefaultsMatchTheCrd) {
  auto object = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: imagenet, namespace: ml}
spec:
  source: {uri: "s3://bucket/imagenet/"}
)");
  ASSERT_TRUE(object.isOk()) << object.status();
  const auto& ds = std::get<Dataset>(*object);
  EXPECT_EQ(ds.metadata.namespace_, "ml");
  ASSERT_EQ(ds.spec.mounts.size(), 1u);
  EXPECT_EQ(ds.spec.mounts[0].name, "");
  EXPECT_EQ(*sourceKindOf(ds.spec.mounts[0].source.uri), SourceKind::kS3);
  EXPECT_EQ(ds.spec.cache.replicas, 1);
  EXPECT_EQ(ds.spec.cache.policy, EvictionPolicy::kPin);
  EXPECT_EQ(ds.spec.cache.warm, WarmPolicy::kOnCreate);
  EXPECT_EQ(ds.spec.cache.chunkSize.bytes, 16 << 20);
  EXPECT_FALSE(ds.spec.cache.capacityPerNode.has_value());
}

TEST(Manifest, TrainingJobDefaultsMatchTheCrd) {
  auto object = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: resnet}
spec:
  template: {spec: {containers: [{name: trainer}]}}
)");
  ASSERT_TRUE(object.isOk()) << object.status();
  const auto& job = std::get<TrainingJob>(*object);
  EXPECT_EQ(job.spec.workers, 1);
  EXPECT_EQ(job.spec.gpusPerWorker, 1);
  EXPECT_EQ(job.spec.masterPort, 29500);
  EXPECT_EQ(job.spec.warmPolicy, WarmStart::kParallel);
  EXPECT_EQ(job.spec.scheduling.schedulerName, "granary-scheduler");
  EXPECT_EQ(job.spec.runPolicy.backoffLimit, 3);
  EXPECT_EQ(job.spec.runPolicy.startDeadlineSeconds, 600);
  EXPECT_EQ(job.spec.runPolicy.cleanPodPolicy, CleanPodPolicy::kRunning);
  EXPECT_TRUE(job.spec.template_.isMap());
}

// accessOrderFile names a file inside the dataset; anything else is refused, naming the field and
// what it takes, every error of the document at once.
TEST(Manifest, AccessOrderFilesStayInsideTheirDataset) {
  auto good = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: resnet}
spec:
  datasets: [{name: imagenet, mountPath: /data, accessOrderFile: lists/epoch-0.txt}]
  template: {spec: {containers: [{name: trainer}]}}
)");
  ASSERT_TRUE(good.isOk()) << good.status();
  EXPECT_EQ(std::get<TrainingJob>(*good).spec.datasets[0].accessOrderFile, "lists/epoch-0.txt");

  auto bad = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: resnet}
spec:
  datasets:
    - {name: a, mountPath: /a, accessOrderFile: /etc/order.txt}
    - {name: b, mountPath: /b, accessOrderFile: ../order.txt}
    - {name: c, mountPath: /c, accessOrderFile: lists/../../order.txt}
    - {name: d, mountPath: /d, accessOrderFile: ""}
  template: {spec: {containers: [{name: trainer}]}}
)");
  ASSERT_FALSE(bad.isOk());
  const std::string message = bad.status().message();
  for (int i = 0; i < 4; ++i) {
    const std::string line = "test.yaml:" + std::to_string(7 + i) + ": spec.datasets[" +
                             std::to_string(i) +
                             "].accessOrderFile: expected a path inside the dataset: relative, "
                             "without .. (for example order.txt)";
    EXPECT_NE(message.find(line), std::string::npos) << message;
  }
  EXPECT_TRUE(isPathInsideDataset("a..b/..c"));
  EXPECT_FALSE(isPathInsideDataset("a/.."));
}

// spec.checkpoints: an s3:// or file:// uri, a mountPath of its own, an upload rate above zero;
// each error names its field and what it takes.
TEST(Manifest, CheckpointsNameAWritableUriAndAPathOfTheirOwn) {
  auto good = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: llama}
spec:
  datasets: [{name: tokens, mountPath: /data}]
  checkpoints: {uri: "s3://runs/llama/", secretRef: {name: creds}, mountPath: /ckpt,
                bandwidthLimit: 200Mi}
  template: {spec: {containers: [{name: trainer}]}}
)");
  ASSERT_TRUE(good.isOk()) << good.status();
  const auto& checkpoints = std::get<TrainingJob>(*good).spec.checkpoints;
  ASSERT_TRUE(checkpoints.has_value());
  EXPECT_EQ(checkpoints->source.uri, "s3://runs/llama/");
  EXPECT_EQ(checkpoints->mountPath, "/ckpt");
  EXPECT_EQ(checkpoints->bandwidthLimit, ByteSize{200 << 20});

  auto bad = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: llama}
spec:
  datasets: [{name: tokens, mountPath: /data}]
  checkpoints: {uri: "https://example.com/ckpt/", mountPath: /data/ckpt, bandwidthLimit: "0"}
  template: {spec: {containers: [{name: trainer}]}}
)");
  ASSERT_FALSE(bad.isOk());
  const std::string message = bad.status().message();
  for (const char* expected :
       {"test.yaml:7: spec.checkpoints.uri: expected an s3:// or file:// URI: checkpoints are "
        "written to it",
        "test.yaml:7: spec.checkpoints.bandwidthLimit: expected a rate above zero"})
    EXPECT_NE(message.find(expected), std::string::npos) << expected << " in " << message;

  auto nested = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: llama}
spec:
  datasets: [{name: tokens, mountPath: /data}]
  checkpoints: {uri: "file:///srv/ckpt/", mountPath: /data/ckpt}
  template: {spec: {containers: [{name: trainer}]}}
)");
  ASSERT_FALSE(nested.isOk());
  EXPECT_NE(nested.status().message().find(
                "spec.checkpoints.mountPath: /data/ckpt overlaps dataset tokens's mountPath /data; "
                "give the checkpoints a path of their own"),
            std::string::npos)
      << nested.status().message();
}

// spec.elastic: 1 <= minWorkers <= workers <= maxWorkers, maxWorkers defaulting to workers;
// each error names its field and the fix.
TEST(Manifest, ElasticJobsRunFromMinToMaxWorkers) {
  const auto job = [](const std::string& elastic) {
    return decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: llama}
spec:
  workers: 3
  elastic: )" + elastic +
                      R"(
  template: {spec: {containers: [{name: trainer}]}}
)");
  };
  auto good = job("{minWorkers: 2}");
  ASSERT_TRUE(good.isOk()) << good.status();
  const auto& elastic = std::get<TrainingJob>(*good).spec.elastic;
  ASSERT_TRUE(elastic.has_value());
  EXPECT_EQ(elastic->minWorkers, 2);
  EXPECT_EQ(elastic->maxWorkers, 3) << "maxWorkers defaults to workers";
  EXPECT_TRUE(job("{minWorkers: 3, maxWorkers: 8}").isOk());

  const auto error = [&](const std::string& policy) {
    auto decoded = job(policy);
    return decoded.isOk() ? std::string("accepted") : decoded.status().message();
  };
  EXPECT_NE(error("{minWorkers: 4}")
                .find("test.yaml:7: spec.elastic.minWorkers: 4 is more than "
                      "spec.workers (3); lower minWorkers or raise workers"),
            std::string::npos)
      << error("{minWorkers: 4}");
  EXPECT_NE(error("{minWorkers: 1, maxWorkers: 2}")
                .find("spec.elastic.maxWorkers: 2 is less than spec.workers (3); raise "
                      "maxWorkers or lower workers"),
            std::string::npos);
  EXPECT_NE(error("{minWorkers: 0}").find("spec.elastic.minWorkers: expected an integer from 1"),
            std::string::npos)
      << error("{minWorkers: 0}");
  EXPECT_NE(error("{maxWorkers: 3}").find("spec.elastic.minWorkers"), std::string::npos)
      << error("{maxWorkers: 3}");
}

// Workers are always a gang: the field that claimed otherwise is gone, and naming it says so.
TEST(Manifest, SchedulingHasNoGangSwitch) {
  auto object = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: resnet}
spec:
  scheduling: {gang: false}
  template: {spec: {containers: [{name: trainer}]}}
)");
  ASSERT_FALSE(object.isOk());
  EXPECT_NE(object.status().message().find("spec.scheduling.gang: unknown field"),
            std::string::npos)
      << object.status().message();
}

TEST(Manifest, OtherKindsAreSkippedAndWrongGranaryVersionsRejected) {
  auto secret = decodeText("apiVersion: v1\nkind: Secret\nmetadata: {name: creds}\n");
  ASSERT_TRUE(secret.isOk());
  EXPECT_EQ(std::get<OtherObject>(*secret).kind, "Secret");

  auto old = decodeText("apiVersion: granary.io/v1beta9\nkind: Dataset\nmetadata: {name: a}\n");
  ASSERT_FALSE(old.isOk());
  EXPECT_EQ(old.status().message(),
            "test.yaml:1: apiVersion: expected granary.io/v1alpha1, got granary.io/v1beta9");

  auto unknown = decodeText("apiVersion: granary.io/v1alpha1\nkind: Cache\nmetadata: {name: a}\n");
  EXPECT_EQ(unknown.status().message(),
            "test.yaml:2: kind: expected Dataset or TrainingJob, got Cache");
}

TEST(Manifest, NamesFollowKubernetesRules) {
  EXPECT_TRUE(isDnsLabel("resnet-50"));
  EXPECT_FALSE(isDnsLabel("-resnet"));
  EXPECT_FALSE(isDnsLabel("ResNet"));
  EXPECT_FALSE(isDnsLabel(std::string(64, 'a')));
  EXPECT_TRUE(isDnsSubdomain("imagenet.v2"));
  EXPECT_FALSE(isDnsSubdomain("imagenet..v2"));
  EXPECT_FALSE(isDnsSubdomain(""));
}

TEST(Manifest, LoadsEveryExampleOfTheRepository) {
  const char* root = std::getenv("GRANARY_SOURCE_DIR");
  if (!root) GTEST_SKIP() << "GRANARY_SOURCE_DIR is not set (ctest sets it)";
  auto documents = loadManifests(std::filesystem::path(root) / "examples");
  ASSERT_TRUE(documents.isOk()) << documents.status();
  int datasets = 0, jobs = 0, others = 0;
  for (const auto& document : *documents) {
    datasets += std::holds_alternative<Dataset>(document.object);
    jobs += std::holds_alternative<TrainingJob>(document.object);
    others += std::holds_alternative<OtherObject>(document.object);
  }
  EXPECT_GE(datasets, 6);
  EXPECT_GE(jobs, 2);
  EXPECT_GE(others, 1);  // the Secret next to the S3 dataset
}

TEST(Manifest, ErrorsOfEveryDocumentAreReportedTogether) {
  const auto dir = std::filesystem::temp_directory_path() / "granary_manifest_test";
  std::filesystem::create_directories(dir);
  {
    std::ofstream a(dir / "a.yaml");
    a << "apiVersion: granary.io/v1alpha1\nkind: Dataset\n"
         "metadata: {name: a}\nspec: {source: {uri: 'ftp://x/'}}\n";
    std::ofstream b(dir / "b.yaml");
    b << "apiVersion: granary.io/v1alpha1\nkind: TrainingJob\n"
         "metadata: {name: b}\nspec: {workers: 0, template: {spec: {containers: [{name: t}]}}}\n";
  }
  auto documents = loadManifests(dir);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(documents.isOk());
  const std::string message = documents.status().message();
  EXPECT_NE(message.find("a.yaml:4: spec.source.uri: expected a URI starting with s3://"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("b.yaml:4: spec.workers: expected an integer from 1 to 4096, got 0"),
            std::string::npos)
      << message;
}

// A PersistentVolumeClaim is no origin: the error names the field and the ways that work.
TEST(Manifest, AReferenceNamesADatasetAndNothingOfAnOrigin) {
  auto object = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: imagenet, namespace: team-b}
spec:
  source: {uri: "dataset://datasets/imagenet/train/"}
)");
  ASSERT_TRUE(object.isOk()) << object.status();
  const auto& spec = std::get<Dataset>(*object).spec;
  ASSERT_TRUE(spec.reference);
  EXPECT_EQ(spec.reference->key(), "datasets/imagenet");
  EXPECT_EQ(spec.reference->path, "train");
  EXPECT_TRUE(spec.mounts.empty());
  for (const char* bad : {"dataset://datasets", "dataset://Datasets/imagenet",
                          "dataset://datasets/imagenet/../x", "dataset://datasets/imagenet//x"})
    EXPECT_FALSE(parseDatasetUri(bad).isOk()) << bad;

  auto cached = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: imagenet, namespace: team-b}
spec:
  source: {uri: "dataset://datasets/imagenet"}
  cache: {replicas: 2}
)");
  ASSERT_FALSE(cached.isOk());
  EXPECT_NE(cached.status().message().find("spec.cache"), std::string::npos) << cached.status();
  auto offered = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: imagenet, namespace: datasets}
spec:
  source: {uri: "s3://corp/imagenet/"}
  sharing: {namespaces: [team-b, team-b]}
)");
  ASSERT_FALSE(offered.isOk());
  EXPECT_NE(offered.status().message().find("spec.sharing.namespaces[1]"), std::string::npos)
      << offered.status();
}

TEST(Manifest, PvcSourcesAreRefusedWithTheWayToServeAClaim) {
  auto object = decodeText(R"(
apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: audio, namespace: ml}
spec:
  source: {uri: "pvc://speech-data/librispeech/"}
)");
  ASSERT_FALSE(object.isOk());
  const std::string message = object.status().message();
  EXPECT_NE(message.find("test.yaml:6: spec.source.uri: expected a URI starting with s3://"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("pvc:// is not supported: serve the claim's files over http(s)://"),
            std::string::npos)
      << message;
}

// Input beyond sane sizes is refused early, naming the limit, as the API server refuses it.
TEST(Manifest, RefusesInputBeyondItsLimits) {
  const auto dir = std::filesystem::temp_directory_path() / "granary_manifest_limits_test";
  std::filesystem::create_directories(dir);
  const std::string dataset =
      "apiVersion: granary.io/v1alpha1\nkind: Dataset\nmetadata: {name: a}\n"
      "spec: {source: {uri: 's3://b/'}}\n";
  {
    std::ofstream big(dir / "big.yaml");
    big << "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {x: '"
        << std::string(5 << 20, 'x') << "'}\n";
    std::ofstream many(dir / "many.yaml");
    for (int i = 0; i < 1001; ++i) many << "---\n" << dataset;
    std::ofstream annotated(dir / "annotated.yaml");
    annotated << "apiVersion: granary.io/v1alpha1\nkind: Dataset\n"
                 "metadata: {name: a, annotations: {note: '"
              << std::string(300 << 10, 'n') << "'}}\nspec: {source: {uri: 's3://b/'}}\n";
    std::ofstream labelled(dir / "labelled.yaml");
    labelled << "apiVersion: granary.io/v1alpha1\nkind: Dataset\n"
                "metadata: {name: a, labels: {team: '"
             << std::string(64, 'l') << "'}}\nspec: {source: {uri: 's3://b/'}}\n";
    std::ofstream fine(dir / "fine.yaml");
    for (int i = 0; i < 1000; ++i) fine << "---\n" << dataset;
  }
  const auto errorOf = [&](const std::string& file) {
    auto loaded = loadManifests(dir / file);
    return loaded.isOk() ? std::string("accepted") : loaded.status().message();
  };
  EXPECT_NE(errorOf("big.yaml").find("at most 4194304 (4 MiB)"), std::string::npos)
      << errorOf("big.yaml");
  EXPECT_NE(errorOf("many.yaml").find("1001 documents; a manifest file may hold at most 1000"),
            std::string::npos)
      << errorOf("many.yaml");
  EXPECT_NE(errorOf("annotated.yaml")
                .find("metadata.annotations: expected annotations of at most "
                      "262144 bytes"),
            std::string::npos)
      << errorOf("annotated.yaml");
  EXPECT_NE(errorOf("labelled.yaml").find("metadata.labels: expected labels"), std::string::npos)
      << errorOf("labelled.yaml");
  auto fine = loadManifests(dir / "fine.yaml");
  EXPECT_TRUE(fine.isOk()) << fine.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace granary::api
