#include "operator/core/readers.h"

#include <algorithm>

#include "common/names.h"
#include "operator/core/workers.h"

namespace granary::op {

using kube::Json;

namespace {

// The access-order file names::kAccessOrderFilesAnnotation names for `dataset`; "" when none (or
// the annotation is not a JSON object of strings).
std::string accessOrderFileIn(const Json& pod, const std::string& dataset) {
  const Json annotations = kube::pathValue(pod, "metadata.annotations");
  if (!annotations.has_string_field(names::kAccessOrderFilesAnnotation)) return {};
  try {
    const Json hints = Json::parse(annotations.at(names::kAccessOrderFilesAnnotation).as_string());
    return hints.has_string_field(dataset) ? hints.at(dataset).as_string() : std::string();
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace

int32_t warmPriorityOf(const std::vector<DatasetReader>& readers) {
  int32_t priority = kWarmPriorityNoReaders;
  for (const auto& r : readers)
    priority = std::max<int32_t>(
        priority, r.running ? kWarmPriorityRunningReaders : kWarmPriorityWaitingReaders);
  return priority;
}

std::string accessOrderFileOf(const std::vector<DatasetReader>& readers) {
  std::string any;
  for (const auto& r : readers) {
    if (r.accessOrderFile.empty()) continue;
    if (r.running) return r.accessOrderFile;
    if (any.empty()) any = r.accessOrderFile;
  }
  return any;
}

std::vector<std::string> datasetsMountedBy(const Json& pod) {
  std::vector<std::string> names;
  const Json volumes = kube::pathValue(pod, "spec.volumes");
  if (!volumes.is_array()) return names;
  for (const auto& volume : volumes.as_array()) {
    const Json driver = kube::pathValue(volume, "csi.driver");
    const Json dataset =
        kube::pathValue(volume, std::string("csi.volumeAttributes.") + names::kCsiDatasetAttribute);
    if (driver.is_string() && driver.as_string() == names::kCsiDriver && dataset.is_string())
      names.push_back(dataset.as_string());
  }
  return names;
}

std::vector<DatasetReader> readersOf(const std::vector<kube::ObjectPtr>& pods,
                                     const std::string& name) {
  std::vector<DatasetReader> readers;
  for (const auto& pod : pods) {
    const Json node = kube::pathValue(*pod, "spec.nodeName");
    const Json phase = kube::pathValue(*pod, "status.phase");
    const bool finished =
        phase.is_string() && (phase.as_string() == "Succeeded" || phase.as_string() == "Failed");
    const auto labels = kube::stringMap(*pod);
    const auto warm = labels.find(names::kWarmLabel);
    if (!node.is_string() || node.as_string().empty() || finished ||
        !kube::pathValue(*pod, "metadata.deletionTimestamp").is_null() ||
        (warm != labels.end() && warm->second == "false"))
      continue;
    const auto mounted = datasetsMountedBy(*pod);
    if (std::find(mounted.begin(), mounted.end(), name) == mounted.end()) continue;
    DatasetReader reader{.podNamespace = kube::namespaceOf(*pod),
                         .podName = kube::nameOf(*pod),
                         .podUid = kube::uidOf(*pod),
                         .node = node.as_string()};
    if (const auto rank = labels.find(names::kRankLabel); rank != labels.end())
      reader.rank = std::atoi(rank->second.c_str());
    reader.running = phase.is_string() && phase.as_string() == "Running";
    reader.accessOrderFile = accessOrderFileIn(*pod, name);
    readers.push_back(std::move(reader));
  }
  std::sort(readers.begin(), readers.end(),
            [](const auto& a, const auto& b) { return a.podName < b.podName; });
  return readers;
}

std::vector<std::string> datasetsNamedBy(const Json& job) {
  std::vector<std::string> names;
  const Json datasets = kube::pathValue(job, "spec.datasets");
  if (!datasets.is_array()) return names;
  for (const auto& d : datasets.as_array())
    if (d.has_string_field("name")) names.push_back(d.at("name").as_string());
  return names;
}

std::vector<DatasetReader> waitingReadersOf(const std::vector<kube::ObjectPtr>& jobs,
                                            const std::string& name) {
  std::vector<DatasetReader> readers;
  for (const auto& job : jobs) {
    const Json phase = kube::pathValue(*job, "status.phase");
    if (!phase.is_string() || phase.as_string() != "Warming" ||
        !kube::pathValue(*job, "metadata.deletionTimestamp").is_null())
      continue;
    const Json datasets = kube::pathValue(*job, "spec.datasets");
    if (!datasets.is_array()) continue;
    for (const auto& d : datasets.as_array()) {
      if (!d.has_string_field("name") || d.at("name").as_string() != name) continue;
      readers.push_back({.podNamespace = kube::namespaceOf(*job),
                         .accessOrderFile = d.has_string_field("accessOrderFile")
                                                ? d.at("accessOrderFile").as_string()
                                                : "",
                         .job = kube::nameOf(*job)});
      break;
    }
  }
  std::sort(readers.begin(), readers.end(),
            [](const auto& a, const auto& b) { return a.job < b.job; });
  return readers;
}

}  // namespace granary::op
