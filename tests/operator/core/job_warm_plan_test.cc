// What a TrainingJob's workers tell the cache nodes through the Dataset controller's
// SetWarmPlan: the access-order file the job names for each dataset, and the warm priority of
// its datasets (running jobs first). The pods are the operator's own (workerPod), read back as
// the Dataset controller reads them (readersOf), turned into the request it sends.
#include <gtest/gtest.h>

#include "common/names.h"
#include "operator/core/readers.h"
#include "operator/core/workers.h"
#include "operator/ensure_request.h"

namespace granary::op {
namespace {

using kube::Json;

Json jobObject() {
  Json job = Json::object();
  job["metadata"]["name"] = Json::string("bert");
  job["metadata"]["namespace"] = Json::string("ml");
  job["metadata"]["uid"] = Json::string("job-uid");
  Json container = Json::object();
  container["name"] = Json::string("trainer");
  container["image"] = Json::string("pytorch");
  job["spec"]["template"]["spec"]["containers"][0] = std::move(container);
  return job;
}

api::TrainingJobSpec jobSpec() {
  api::TrainingJobSpec spec;
  spec.workers = 2;
  spec.datasets = {{.name = "wiki", .mountPath = "/data", .accessOrderFile = "lists/epoch.txt"},
                   {.name = "coco", .mountPath = "/coco"}};
  return spec;
}

// Worker `rank` of the job, placed on n1, in `phase`.
kube::ObjectPtr placedWorker(const api::TrainingJobSpec& spec, int rank, const std::string& phase) {
  Json pod = workerPod(jobObject(), spec, rank, 0);
  pod["metadata"]["uid"] = Json::string("pod-" + std::to_string(rank));
  pod["spec"]["nodeName"] = Json::string("n1");
  pod["status"]["phase"] = Json::string(phase);
  return std::make_shared<const Json>(std::move(pod));
}

v1::SetWarmPlanRequest warmPlanFor(const std::vector<kube::ObjectPtr>& pods,
                                   const std::string& dataset) {
  v1::DatasetRef ref;
  ref.set_namespace_("ml");
  ref.set_name(dataset);
  return warmPlanRequestOf(ref, readersOf(pods, dataset));
}

TEST(JobWarmPlanTest, TheAccessOrderFileOfADatasetReachesItsWarmPlan) {
  const api::TrainingJobSpec spec = jobSpec();
  const std::vector<kube::ObjectPtr> pods = {placedWorker(spec, 0, "Running"),
                                             placedWorker(spec, 1, "Running")};
  const v1::SetWarmPlanRequest wiki = warmPlanFor(pods, "wiki");
  EXPECT_EQ(wiki.access_order_file(), "lists/epoch.txt");
  EXPECT_EQ(wiki.readers_size(), 2);
  EXPECT_EQ(warmPlanFor(pods, "coco").access_order_file(), "")
      << "a dataset whose reference names no file gets none";
}

TEST(JobWarmPlanTest, DatasetsOfRunningJobsWarmBeforeThoseOfJobsStillWaiting) {
  const api::TrainingJobSpec spec = jobSpec();
  EXPECT_EQ(warmPlanFor({}, "wiki").priority(), kWarmPriorityNoReaders);
  const int32_t waiting =
      warmPlanFor({placedWorker(spec, 0, "Pending"), placedWorker(spec, 1, "Pending")}, "wiki")
          .priority();
  const int32_t running =
      warmPlanFor({placedWorker(spec, 0, "Running"), placedWorker(spec, 1, "Running")}, "wiki")
          .priority();
  EXPECT_EQ(waiting, kWarmPriorityWaitingReaders);
  EXPECT_EQ(running, kWarmPriorityRunningReaders);
  EXPECT_GT(running, waiting);
  EXPECT_GT(waiting, int32_t{kWarmPriorityNoReaders});
}

TEST(JobWarmPlanTest, WorkersWithoutHintsCarryNoAnnotation) {
  api::TrainingJobSpec spec = jobSpec();
  spec.datasets[0].accessOrderFile.clear();
  const Json pod = workerPod(jobObject(), spec, 0, 0);
  EXPECT_FALSE(
      kube::pathValue(pod, "metadata.annotations").has_field(names::kAccessOrderFilesAnnotation));
  const kube::ObjectPtr placed = placedWorker(spec, 0, "Running");
  EXPECT_EQ(warmPlanFor({placed}, "wiki").access_order_file(), "");
}

// The job object with spec.datasets as the API server holds it, in status.phase `phase`.
kube::ObjectPtr jobIn(const std::string& phase) {
  Json job = jobObject();
  job["spec"]["datasets"][0]["name"] = Json::string("wiki");
  job["spec"]["datasets"][0]["mountPath"] = Json::string("/data");
  job["spec"]["datasets"][0]["accessOrderFile"] = Json::string("lists/epoch.txt");
  job["spec"]["datasets"][1]["name"] = Json::string("coco");
  job["spec"]["datasets"][1]["mountPath"] = Json::string("/coco");
  job["status"]["phase"] = Json::string(phase);
  return std::make_shared<const Json>(std::move(job));
}

TEST(JobWarmPlanTest, AJobWaitingForItsDatasetsReadsEachOfThemBeforeItHasAWorker) {
  const std::vector<kube::ObjectPtr> jobs = {jobIn("Warming")};
  EXPECT_EQ(datasetsNamedBy(*jobs[0]), (std::vector<std::string>{"wiki", "coco"}));
  const auto readers = waitingReadersOf(jobs, "wiki");
  ASSERT_EQ(readers.size(), 1u);
  EXPECT_EQ(readers[0].job, "bert");
  EXPECT_EQ(readers[0].podNamespace, "ml");
  EXPECT_EQ(readers[0].podName, "") << "no pod yet";
  EXPECT_EQ(readers[0].rank, -1);
  EXPECT_FALSE(readers[0].running);

  v1::DatasetRef ref;
  ref.set_namespace_("ml");
  ref.set_name("wiki");
  const v1::SetWarmPlanRequest wiki = warmPlanRequestOf(ref, readers);
  EXPECT_EQ(wiki.readers_size(), 1) << "a reader: an OnJob dataset warms for the waiting job";
  EXPECT_EQ(wiki.priority(), kWarmPriorityWaitingReaders);
  EXPECT_EQ(wiki.access_order_file(), "lists/epoch.txt");
  EXPECT_EQ(wiki.readers(0).pod_name(), "");
  EXPECT_EQ(wiki.readers(0).rank(), -1);
  EXPECT_EQ(waitingReadersOf(jobs, "coco").size(), 1u);
  EXPECT_TRUE(waitingReadersOf(jobs, "imagenet").empty());
}

TEST(JobWarmPlanTest, OnlyAJobStillWaitingForItsDatasetsIsAWaitingReader) {
  for (const std::string phase :
       {"Pending", "Running", "Restarting", "Suspended", "Succeeded", "Failed", ""})
    EXPECT_TRUE(waitingReadersOf({jobIn(phase)}, "wiki").empty()) << phase;
  Json deleting = *jobIn("Warming");
  deleting["metadata"]["deletionTimestamp"] = Json::string("2026-11-26T10:00:00Z");
  EXPECT_TRUE(waitingReadersOf({std::make_shared<const Json>(deleting)}, "wiki").empty());
}

}  // namespace
}  // namespace granary::op
