// What a CSI NodePublishVolume asks for, checked, and the record the node keeps of it.
#include "cache-node/csi/publication.h"

#include <gtest/gtest.h>

#include <functional>

#include "cache-node/csi/checkpoint_volumes.h"

namespace granary::cache {
namespace {

PublishFields request() {
  PublishFields f;
  f.volumeId = "csi-7f3c";
  f.targetPath = "/var/lib/kubelet/pods/7f3c/volumes/kubernetes.io~csi/data/mount";
  f.hasCapability = true;
  f.volumeContext = {{"csi.storage.k8s.io/ephemeral", "true"},
                     {"csi.storage.k8s.io/pod.namespace", "ml"},
                     {"csi.storage.k8s.io/pod.name", "resnet-worker-0"},
                     {"csi.storage.k8s.io/pod.uid", "7f3c-11ee"},
                     {"dataset", "coco"}};
  return f;
}

TEST(Publication, ReadsTheDatasetOfThePodsNamespaceAndRecordsIt) {
  auto p = parsePublication(request());
  ASSERT_TRUE(p.isOk()) << p.status();
  EXPECT_EQ(p->datasetNamespace, "ml");
  EXPECT_EQ(p->datasetName, "coco");
  EXPECT_EQ(p->podUid, "7f3c-11ee");
  const auto record = parseRecord(formatRecord({*p, 4}));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->generation, 4);
  EXPECT_EQ(record->publication.targetPath, p->targetPath);
  EXPECT_EQ(record->publication.podName, "resnet-worker-0");
}

TEST(Publication, RefusesWhatItCannotServe) {
  auto block = request();
  block.blockAccess = true;
  EXPECT_EQ(parsePublication(block).status().code(), StatusCode::kInvalidArgument);
  auto other = request();
  other.volumeContext["namespace"] = "prod";
  EXPECT_EQ(parsePublication(other).status().code(), StatusCode::kPermissionDenied);
  auto unknown = request();
  unknown.volumeContext["datset"] = "coco";
  EXPECT_NE(parsePublication(unknown).status().message().find("volumeAttributes.datset"),
            std::string::npos);
}

TEST(Publication, AVersionPinsTheVolumeAndOnlyAPositiveNumberIsOne) {
  EXPECT_EQ(parsePublication(request())->version, 0) << "none: the newest on the node";
  auto pinned = request();
  pinned.volumeContext["version"] = "7";
  EXPECT_EQ(parsePublication(pinned)->version, 7);
  for (const char* bad : {"0", "-1", "7a", "latest", "99999999999999999999"}) {
    auto wrong = request();
    wrong.volumeContext["version"] = bad;
    const auto parsed = parsePublication(wrong);
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(parsed.status().message().find("volumeAttributes.version"), std::string::npos)
        << parsed.status().message();
  }
}

TEST(Publication, WarmFirstAsksForAWarmShareAndOnlyABooleanIsOne) {
  EXPECT_FALSE(parsePublication(request())->warmFirst) << "none: published at once";
  for (const auto& [value, warmFirst] : {std::pair{"true", true}, {"false", false}}) {
    auto asked = request();
    asked.volumeContext["warmFirst"] = value;
    EXPECT_EQ(parsePublication(asked)->warmFirst, warmFirst) << value;
  }
  auto wrong = request();
  wrong.volumeContext["warmFirst"] = "yes";
  const auto parsed = parsePublication(wrong);
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("volumeAttributes.warmFirst: \"yes\""),
            std::string::npos)
      << parsed.status().message();
}

TEST(Publication, FieldsWithTabsOrNewlinesAreRefusedNotMisrecorded) {
  // Found by tests/fuzz/csi_publication_fuzz: a tab in the pod's name (or a newline in the
  // dataset attribute, which any pod author writes) was accepted, and its one-line record read
  // back as another publication, or as none, after the node restarted.
  for (const auto& [key, value] : std::initializer_list<std::pair<std::string, std::string>>{
           {"csi.storage.k8s.io/pod.name", "res\t\tnet-worker-0"},
           {"dataset", "coco\n/x\tv\tml\tcoco\t1\tml\tp\tu"},
           {"csi.storage.k8s.io/pod.uid", "7f3c\n"},
           {"csi.storage.k8s.io/pod.namespace", "m\tl"}}) {
    auto f = request();
    f.volumeContext[key] = value;
    if (key == "csi.storage.k8s.io/pod.namespace") f.volumeContext["namespace"] = value;
    auto p = parsePublication(f);
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << key;
    EXPECT_NE(p.status().message().find("tabs or newlines"), std::string::npos) << p.status();
  }
  auto id = request();
  id.volumeId = "csi-\t7f3c";
  EXPECT_NE(parsePublication(id).status().message().find("volume_id"), std::string::npos);
}

TEST(Publication, ARecordReadsBackAsWrittenWhateverItsLastField) {
  // Found by tests/fuzz/csi_publication_fuzz: records were split with getline(), which drops an
  // empty last field, so a record ending in an empty field did not read back, and a line with a
  // ninth, empty field after a stray tab did.
  PublicationRecord record{*parsePublication(request()), 7};
  record.publication.podUid.clear();
  const auto again = parseRecord(formatRecord(record));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->publication.podUid, "");
  EXPECT_EQ(again->publication.podName, "resnet-worker-0");
  EXPECT_FALSE(parseRecord(formatRecord({*parsePublication(request()), 7}) + "\t"));
}

TEST(Publication, ARecordKeepsTheDatasetItServesAndOldRecordsServeTheirOwn) {
  PublicationRecord view{*parsePublication(request()), 3, "datasets", "imagenet", "train"};
  const auto again = parseRecord(formatRecord(view));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->servedNamespace, "datasets");
  EXPECT_EQ(again->servedName, "imagenet");
  EXPECT_EQ(again->path, "train");
  // A record of eight fields, as written before views: its own dataset, at its root.
  std::string line = formatRecord(view);
  for (int i = 0; i < 3; ++i) line.erase(line.rfind('\t'));
  const auto old = parseRecord(line);
  ASSERT_TRUE(old);
  EXPECT_EQ(old->servedNamespace, old->publication.datasetNamespace);
  EXPECT_EQ(old->servedName, "coco");
  EXPECT_EQ(old->path, "");
}

PublishFields checkpointRequest() {
  PublishFields f = request();
  f.volumeContext.erase("dataset");
  f.volumeContext.insert({{"checkpoints", "s3://runs/bert/"},
                          {"endpoint", "http://minio:9000"},
                          {"bandwidthLimit", "104857600"},
                          {"option.addressing", "path"}});
  f.secrets = {{"accessKeyId", "AKIA1"}, {"secretAccessKey", "hunter2"}};
  return f;
}

TEST(Publication, ACheckpointVolumeCarriesItsOriginAndTheSecretsCredentials) {
  ASSERT_TRUE(namesCheckpoints(checkpointRequest()));
  EXPECT_FALSE(namesCheckpoints(request()));
  auto p = parseCheckpointPublication(checkpointRequest());
  ASSERT_TRUE(p.isOk()) << p.status();
  EXPECT_EQ(p->podNamespace, "ml");
  EXPECT_EQ(p->source.uri, "s3://runs/bert/");
  EXPECT_EQ(p->source.endpoint, "http://minio:9000");
  EXPECT_EQ(p->source.options, (std::map<std::string, std::string>{{"addressing", "path"}}));
  EXPECT_EQ(p->source.secretAccessKey.reveal(), "hunter2");
  EXPECT_EQ(p->bandwidthBytesPerSecond, 100 << 20);
  EXPECT_TRUE(p->peers.empty());
  PublishFields withPeers = checkpointRequest();
  withPeers.volumeContext["checkpointPeers"] = "n1=10.0.0.1:7400,n2=10.0.0.2:7400";
  const auto peered = parseCheckpointPublication(withPeers);
  ASSERT_TRUE(peered.isOk()) << peered.status();
  EXPECT_EQ(peered->peers, (std::vector<std::pair<std::string, std::string>>{
                               {"n1", "10.0.0.1:7400"}, {"n2", "10.0.0.2:7400"}}));

  // What the node records of it, to open it again after a restart: never the credentials.
  const std::string line = formatVolumeRecord(
      {.ns = "ml", .source = p->source, .bandwidthBytesPerSecond = 7, .needsCredentials = true});
  EXPECT_EQ(line.find("hunter2"), std::string::npos);
  EXPECT_EQ(line.find("AKIA1"), std::string::npos);
  const auto record = parseVolumeRecord(line + "\n");
  ASSERT_TRUE(record);
  EXPECT_EQ(record->ns, "ml");
  EXPECT_EQ(record->source.uri, p->source.uri);
  EXPECT_EQ(record->source.endpoint, p->source.endpoint);
  EXPECT_EQ(record->source.options, p->source.options);
  EXPECT_EQ(record->bandwidthBytesPerSecond, 7);
  EXPECT_TRUE(record->needsCredentials);
  EXPECT_FALSE(parseVolumeRecord("ml\tfile:///x"));
  EXPECT_FALSE(parseVolumeRecord("ml\tfile:///x\t\t\t0\tmaybe"));
}

TEST(Publication, ACheckpointVolumeThatCannotBeRecordedOrReachedIsRefused) {
  const auto refused = [](const std::function<void(PublishFields&)>& change,
                          const std::string& field) {
    PublishFields f = checkpointRequest();
    change(f);
    const auto p = parseCheckpointPublication(f);
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(p.status().message().find(field), std::string::npos) << p.status();
  };
  refused([](auto& f) { f.volumeContext["checkpoints"] = "http://example.com/"; },
          "volumeAttributes.checkpoints");
  refused([](auto& f) { f.volumeContext["checkpoints"] = "file://relative"; },
          "volumeAttributes.checkpoints");
  refused([](auto& f) { f.volumeContext["checkpoints"] = "s3://runs/a\tb"; },
          "volumeAttributes.checkpoints: must not contain tabs");
  refused([](auto& f) { f.volumeContext["option.a=b"] = "c"; }, "volumeAttributes.option.a=b");
  refused([](auto& f) { f.volumeContext["bandwidthLimit"] = "0"; },
          "volumeAttributes.bandwidthLimit");
  refused([](auto& f) { f.volumeContext["version"] = "3"; }, "volumeAttributes.version: unknown");
  refused([](auto& f) { f.volumeContext["checkpointPeers"] = "n1=10.0.0.1:7400,=x"; },
          "volumeAttributes.checkpointPeers: \"=x\" is not node=host:port");
  refused([](auto& f) { f.secrets.erase("secretAccessKey"); }, "nodePublishSecretRef");
  refused([](auto& f) { f.volumeContext.erase("csi.storage.k8s.io/ephemeral"); },
          "ephemeral inline");
}

}  // namespace
}  // namespace granary::cache
