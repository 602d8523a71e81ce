// Local mode's plan (cli/local_job.h): the same manifests as a cluster's, turned into workers
// with the operator's environment, GPUs split by gpusPerWorker, $(VAR) expanded as Kubernetes
// does, mount paths mapped under the run directory, and errors that name the field.
#include "cli/local_job.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

namespace granary::cli {
namespace {

class LocalJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::filesystem::temp_directory_path() /
            ("granary-local-job-" + std::to_string(::getpid()) + ".yaml");
  }
  void TearDown() override { std::filesystem::remove(file_); }

  Result<LocalPlan> plan(const std::string& yaml, LocalRunOptions options = {}) {
    std::ofstream(file_) << yaml;
    auto documents = api::loadManifests(file_);
    if (!documents.isOk()) return documents.status();
    options.runDirectory = "/run/granary";
    options.masterPort = options.masterPort ? options.masterPort : 40000;
    return planLocalRun(*documents, options);
  }

  std::filesystem::path file_;
};

const std::string kDataset = R"(apiVersion: granary.io/v1alpha1
kind: Dataset
metadata: {name: coco, namespace: ml}
spec:
  source: {uri: "file:///srv/coco/"}
---
)";

std::string job(const std::string& specExtra, const std::string& container) {
  return R"(apiVersion: granary.io/v1alpha1
kind: TrainingJob
metadata: {name: resnet, namespace: ml}
spec:
  datasets: [{name: coco, mountPath: /data/coco}]
  workers: 2
)" + specExtra +
         R"(  template:
    spec:
      containers:
)" + container;
}

const std::string kTrainer = R"yaml(        - name: trainer
          image: pytorch
          command: [python, train.py, "--data=/data/coco/train", "--world=$(WORLD_SIZE)"]
          args: ["$(NOT_SET)", "$$(RANK)", "sh -c 'ls /data/coco'", /data/cocoa]
          workingDir: /data/coco
          env:
            - {name: RANK, value: "99"}
            - {name: OUT, value: "/data/coco/out-$(LOCAL_RANK)"}
            - {name: ROOT, value: "$(DATA)"}
            - {name: DATA, value: /data/coco}
)yaml";

std::map<std::string, std::string> envOf(const LocalWorker& worker) {
  return {worker.env.begin(), worker.env.end()};
}

TEST_F(LocalJobTest, WorkersGetTheOperatorsEnvironmentAndTheirMountsMapped) {
  auto planned = plan(kDataset + job("  gpusPerWorker: 0\n", kTrainer));
  ASSERT_TRUE(planned.isOk()) << planned.status();
  ASSERT_EQ(planned->datasets.size(), 1u);
  EXPECT_EQ(planned->datasets[0].localPath, "/run/granary/data/coco");
  ASSERT_EQ(planned->workers.size(), 2u);

  const LocalWorker& second = planned->workers[1];
  EXPECT_EQ(second.name, "resnet-worker-1");
  EXPECT_EQ(second.argv,
            (std::vector<std::string>{"python", "train.py", "--data=/run/granary/data/coco/train",
                                      "--world=2", "$(NOT_SET)", "$(RANK)",
                                      "sh -c 'ls /run/granary/data/coco'", "/data/cocoa"}));
  EXPECT_EQ(second.workingDirectory, "/run/granary/data/coco");
  const auto env = envOf(second);
  EXPECT_EQ(env.at("RANK"), "99") << "the template's own value wins, as on a cluster";
  EXPECT_EQ(env.at("PET_NODE_RANK"), "1");
  EXPECT_EQ(env.at("WORLD_SIZE"), "2");
  EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(env.at("MASTER_PORT"), "40000");
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "") << "no GPUs asked for, none seen";
  EXPECT_EQ(env.at("GRANARY_RUN_DIR"), "/run/granary");
  EXPECT_EQ(env.at("OUT"), "/run/granary/data/coco/out-$(LOCAL_RANK)")
      << "an env value sees only the variables before it";
  EXPECT_EQ(env.at("ROOT"), "$(DATA)");
  EXPECT_EQ(env.at("DATA"), "/run/granary/data/coco");
}

// The checkpoint volume's mountPath maps under the run directory like a dataset's, the longer
// path first where one is below the other's parent.
TEST_F(LocalJobTest, TheCheckpointVolumeIsMappedUnderTheRunDirectory) {
  const std::string trainer = R"yaml(        - name: trainer
          image: pytorch
          command: [python, train.py, --data=/data/coco, --save=/data/ckpt/run-1]
)yaml";
  auto planned =
      plan(kDataset + job("  gpusPerWorker: 0\n  checkpoints: {uri: \"file:///srv/ckpt/\", "
                          "mountPath: /data/ckpt, bandwidthLimit: 64Mi}\n",
                          trainer));
  ASSERT_TRUE(planned.isOk()) << planned.status();
  ASSERT_TRUE(planned->checkpoints.has_value());
  EXPECT_EQ(planned->checkpoints->localPath, "/run/granary/data/ckpt");
  EXPECT_EQ(planned->checkpoints->volume.source.uri, "file:///srv/ckpt/");
  EXPECT_EQ(planned->checkpoints->volume.bandwidthLimit, ByteSize{64 << 20});
  EXPECT_EQ(planned->workers[0].argv,
            (std::vector<std::string>{"python", "train.py", "--data=/run/granary/data/coco",
                                      "--save=/run/granary/data/ckpt/run-1"}));
}

// An elastic job's workers meet at a rendezvous store of their own, run beside them with rank
// 0's environment; they get torchrun's c10d settings and no fixed ranks.
TEST_F(LocalJobTest, AnElasticJobsWorkersMeetAtAStoreOfTheirOwn) {
  LocalRunOptions options;
  options.rendezvousPort = 41000;
  options.rendezvousNoticePort = 41001;
  options.rendezvousToken = "run-token";
  auto planned =
      plan(kDataset + job("  gpusPerWorker: 0\n  elastic: {minWorkers: 1, maxWorkers: 4}\n"
                          "  runPolicy: {backoffLimit: 5}\n",
                          kTrainer),
           options);
  ASSERT_TRUE(planned.isOk()) << planned.status();
  const auto env = envOf(planned->workers[1]);
  EXPECT_EQ(env.at("PET_NNODES"), "1:4");
  EXPECT_EQ(env.at("PET_RDZV_BACKEND"), "c10d");
  EXPECT_EQ(env.at("PET_RDZV_ENDPOINT"), "127.0.0.1:41000");
  EXPECT_EQ(env.at("PET_RDZV_ID"), "ml-resnet");
  EXPECT_EQ(env.at("PET_RDZV_CONF"), "is_host=false,last_call_timeout=5");
  EXPECT_EQ(env.at("PET_MAX_RESTARTS"), "5");
  EXPECT_FALSE(env.contains("PET_NODE_RANK")) << "the rendezvous assigns ranks";
  EXPECT_FALSE(env.contains("MASTER_ADDR"));
  EXPECT_EQ(env.at("RANK"), "99") << "the template's own variables still win";

  ASSERT_TRUE(planned->rendezvous.has_value());
  EXPECT_EQ(planned->rendezvous->name, "resnet-rendezvous");
  EXPECT_EQ(planned->rendezvous->argv, api::rendezvousStoreCommand(41000, 41001));
  EXPECT_EQ(planned->rendezvousId, "ml-resnet");
  EXPECT_EQ(planned->rendezvousNotices, "127.0.0.1:41001");
  EXPECT_EQ(planned->rendezvous->argv.front(), "python3");
  EXPECT_EQ(planned->rendezvous->argv.back(), "41001");
  EXPECT_EQ(envOf(*planned->rendezvous).at(api::kRendezvousTokenEnv), "run-token")
      << "the store takes only the run's own notices";
  EXPECT_EQ(planned->rendezvousToken, "run-token");

  auto fixed = plan(kDataset + job("  gpusPerWorker: 0\n", kTrainer), options);
  ASSERT_TRUE(fixed.isOk()) << fixed.status();
  EXPECT_FALSE(fixed->rendezvous.has_value());
}

// As a cluster grows an elastic job where capacity allows, a run plans the ranks beyond
// spec.workers up to maxWorkers that the machine's GPUs leave room for; a fixed gang keeps
// spec.workers.
TEST_F(LocalJobTest, AnElasticJobGrowsTowardsMaxWorkersAsFarAsTheGpusAllow) {
  const auto planned = [&](const std::string& extra, int gpus) {
    auto p = plan(kDataset + job(extra, kTrainer), {.gpuCount = gpus});
    EXPECT_TRUE(p.isOk()) << p.status();
    std::vector<std::string> names;
    if (p.isOk())
      for (const auto& w : p->workers) names.push_back(w.name);
    return names;
  };
  const std::string elastic = "  elastic: {minWorkers: 1, maxWorkers: 4}\n";
  EXPECT_EQ(planned("  gpusPerWorker: 0\n" + elastic, 0),
            (std::vector<std::string>{"resnet-worker-0", "resnet-worker-1", "resnet-worker-2",
                                      "resnet-worker-3"}));
  EXPECT_EQ(planned("  gpusPerWorker: 2\n" + elastic, 7).size(), 3u) << "7 GPUs: 3 workers of 2";
  EXPECT_EQ(planned("  gpusPerWorker: 2\n" + elastic, 4).size(), 2u);
  EXPECT_EQ(planned("  gpusPerWorker: 1\n" + elastic, 8).size(), 4u) << "maxWorkers at most";
  EXPECT_EQ(planned("  gpusPerWorker: 0\n", 0).size(), 2u);
  auto grown = plan(kDataset + job("  gpusPerWorker: 2\n" + elastic, kTrainer), {.gpuCount = 6});
  ASSERT_TRUE(grown.isOk()) << grown.status();
  EXPECT_EQ(envOf(grown->workers[2]).at("CUDA_VISIBLE_DEVICES"), "4,5");
  EXPECT_EQ(envOf(grown->workers[2]).at("PET_NNODES"), "1:4");
}

TEST_F(LocalJobTest, GpusAreSplitByGpusPerWorkerOrRefused) {
  auto planned = plan(kDataset + job("  gpusPerWorker: 2\n", kTrainer), {.gpuCount = 4});
  ASSERT_TRUE(planned.isOk()) << planned.status();
  EXPECT_EQ(planned->workers[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(envOf(planned->workers[1]).at("CUDA_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(envOf(planned->workers[1]).at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");

  auto tooFew =
      plan(kDataset + job("  gpusPerWorker: 2\n", kTrainer), {.gpuCount = 3, .noGpuReason = ""});
  ASSERT_FALSE(tooFew.isOk());
  EXPECT_NE(tooFew.status().message().find("spec.gpusPerWorker: 2 workers x 2 GPUs need 4 GPUs; "
                                           "this machine has 3"),
            std::string::npos)
      << tooFew.status();
  auto none = plan(kDataset + job("", kTrainer), {.noGpuReason = "no NVIDIA driver"});
  ASSERT_FALSE(none.isOk());
  EXPECT_NE(none.status().message().find("has 0 (no NVIDIA driver)"), std::string::npos)
      << none.status();
}

TEST_F(LocalJobTest, WhatCannotRunLocallyIsNamed) {
  const auto refused = [&](const std::string& yaml, const std::string& words,
                           LocalRunOptions options = {}) {
    auto planned = plan(yaml, options);
    ASSERT_FALSE(planned.isOk()) << words;
    EXPECT_EQ(planned.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(planned.status().message().find(words), std::string::npos)
        << words << ": " << planned.status();
  };
  refused(kDataset, "hold no TrainingJob");
  refused(job("  gpusPerWorker: 0\n", kTrainer), "spec.datasets[0].name: Dataset ml/coco is not");
  refused(kDataset + job("  gpusPerWorker: 0\n", kTrainer), "--job: the manifests hold no",
          {.jobName = "other"});
  refused(kDataset + job("  gpusPerWorker: 0\n", kTrainer) + "---\n" +
              job("  gpusPerWorker: 0\n", kTrainer),
          "several TrainingJobs");
  refused(kDataset + job("  gpusPerWorker: 0\n", "        - {name: c, image: pytorch}\n"),
          "containers[0].command: local mode runs the container's command");
  refused(kDataset + job("  gpusPerWorker: 0\n", R"(        - name: c
          image: pytorch
          command: [train]
          env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: s, key: k}}}]
)"),
          "valueFrom: local mode has no Secrets");
  std::string climbing = job("  gpusPerWorker: 0\n", kTrainer);  // out of the run directory
  climbing.replace(climbing.find("/data/coco}"), 10, "/data/../../etc");
  refused(kDataset + climbing,
          "spec.datasets[0].mountPath: \"/data/../../etc\" has a \"..\" segment");
}

TEST_F(LocalJobTest, TheAccessOrderHintGoesWithItsDataset) {
  std::string manifests = kDataset + job("  gpusPerWorker: 0\n", kTrainer);
  const std::string mount = "{name: coco, mountPath: /data/coco}";
  manifests.replace(manifests.find(mount), mount.size(),
                    "{name: coco, mountPath: /data/coco, accessOrderFile: lists/order.txt}");
  auto planned = plan(manifests);
  ASSERT_TRUE(planned.isOk()) << planned.status();
  ASSERT_EQ(planned->datasets.size(), 1u);
  EXPECT_EQ(planned->datasets[0].accessOrderFile, "lists/order.txt");
  auto without = plan(kDataset + job("  gpusPerWorker: 0\n", kTrainer));
  ASSERT_TRUE(without.isOk()) << without.status();
  EXPECT_EQ(without->datasets[0].accessOrderFile, "");
}

TEST(ExpandReferencesTest, FollowsKubernetesRules) {
  const auto lookup = [](std::string_view name) -> std::optional<std::string> {
    if (name == "A") return "alpha";
    return std::nullopt;
  };
  EXPECT_EQ(expandReferences("$(A)-$(B)-$$(A)-$$-$-$(", lookup), "alpha-$(B)-$(A)-$-$-$(");
}

}  // namespace
}  // namespace granary::cli
