#include "common/api/training_job.h"

#include <algorithm>
#include <set>

namespace granary::api {
namespace {

// The template must be a PodTemplateSpec with at least one named container; the rest of it
// is validated by the API server when the operator creates the workers.
Status checkTemplate(const config::Node& node) {
  const config::Node* spec = node.find("spec");
  const config::Node* containers = spec ? spec->find("containers") : nullptr;
  if (!containers || !containers->isList() || containers->items().empty()) {
    return invalidArgument(node.where() +
                           ".spec.containers: a pod template needs at least one "
                           "container");
  }
  for (const auto& container : containers->items()) {
    const config::Node* name = container.find("name");
    if (!name || !name->isScalar() || !isDnsLabel(name->scalar())) {
      return invalidArgument(container.where() +
                             ".name: every container needs a name (RFC 1123 "
                             "label)");
    }
  }
  return Status::ok();
}

}  // namespace

Status decodeValue(const config::Node& node, DatasetMount& out) {
  config::Fields f(node);
  f.required("name", out.name, isDnsSubdomain, "the name of a Dataset in the job's namespace");
  f.required(
      "mountPath", out.mountPath,
      [](const std::string& p) { return p.size() > 1 && p.front() == '/' && p.size() <= 1024; },
      "an absolute path other than /");
  f.optional("accessOrderFile", out.accessOrderFile, isPathInsideDataset,
             "a path inside the dataset: relative, without .. (for example order.txt)");
  return f.finish();
}

Status decodeValue(const config::Node& node, CheckpointVolume& out) {
  config::Fields f(node);
  readSource(f, out.source);
  const config::Node* uri = node.find("uri");
  if (uri && !out.source.uri.starts_with("s3://") && !out.source.uri.starts_with("file://") &&
      sourceKindOf(out.source.uri).isOk())
    f.fail(config::expected(*uri, "an s3:// or file:// URI: checkpoints are written to it"));
  f.required(
      "mountPath", out.mountPath,
      [](const std::string& p) { return p.size() > 1 && p.front() == '/' && p.size() <= 1024; },
      "an absolute path other than /");
  f.optional(
      "bandwidthLimit", out.bandwidthLimit,
      [](const std::optional<ByteSize>& s) { return s->bytes > 0; },
      "a rate above zero in bytes per second, such as 200Mi");
  return f.finish();
}

Status decodeValue(const config::Node& node, WarmStart& out) {
  return config::decodeEnum(node, out,
                            {{"Parallel", WarmStart::kParallel},
                             {"BeforeStart", WarmStart::kBeforeStart},
                             {"None", WarmStart::kNone}});
}

Status decodeValue(const config::Node& node, Locality& out) {
  return config::decodeEnum(
      node, out, {{"Preferred", Locality::kPreferred}, {"Required", Locality::kRequired}});
}

Status decodeValue(const config::Node& node, CleanPodPolicy& out) {
  return config::decodeEnum(node, out,
                            {{"All", CleanPodPolicy::kAll},
                             {"Running", CleanPodPolicy::kRunning},
                             {"None", CleanPodPolicy::kNone}});
}

Status decodeValue(const config::Node& node, RestartPolicy& out) {
  return config::decodeEnum(node, out,
                            {{"OnFailure", RestartPolicy::kOnFailure},
                             {"ExitCode", RestartPolicy::kExitCode},
                             {"Never", RestartPolicy::kNever}});
}

Status decodeValue(const config::Node& node, Scheduling& out) {
  config::Fields f(node);
  f.optional("locality", out.locality);
  f.optional("schedulerName", out.schedulerName, isDnsSubdomain, "a scheduler name");
  f.optional("priorityClassName", out.priorityClassName, isDnsSubdomain, "a PriorityClass name");
  return f.finish();
}

Status decodeValue(const config::Node& node, RunPolicy& out) {
  config::Fields f(node);
  f.optional(
      "backoffLimit", out.backoffLimit, [](int32_t v) { return v >= 0 && v <= 100; },
      "an integer from 0 to 100");
  f.optional(
      "activeDeadlineSeconds", out.activeDeadlineSeconds,
      [](const std::optional<int64_t>& v) { return *v >= 1; }, "an integer >= 1");
  f.optional(
      "startDeadlineSeconds", out.startDeadlineSeconds, [](int64_t v) { return v >= 1; },
      "an integer >= 1");
  f.optional(
      "ttlSecondsAfterFinished", out.ttlSecondsAfterFinished,
      [](const std::optional<int64_t>& v) { return *v >= 0; }, "an integer >= 0");
  f.optional("cleanPodPolicy", out.cleanPodPolicy);
  f.optional("restartPolicy", out.restartPolicy);
  return f.finish();
}

Status decodeValue(const config::Node& node, TrainingJobSpec& out) {
  config::Fields f(node);
  const config::Node* datasets = f.optional(
      "datasets", out.datasets, [](const std::vector<DatasetMount>& d) { return d.size() <= 16; },
      "at most 16 datasets");
  const config::Node* checkpoints = f.optional("checkpoints", out.checkpoints);
  f.optional(
      "workers", out.workers, [](int32_t w) { return w >= 1 && w <= 4096; },
      "an integer from 1 to 4096");
  f.optional(
      "gpusPerWorker", out.gpusPerWorker, [](int32_t g) { return g >= 0 && g <= 64; },
      "an integer from 0 to 64");
  f.optional(
      "masterPort", out.masterPort, [](int32_t p) { return p >= 1 && p <= 65535; },
      "a port from 1 to 65535");
  if (f.required("template", out.template_)) f.fail(checkTemplate(out.template_));
  f.optional("warmPolicy", out.warmPolicy);
  f.optional("scheduling", out.scheduling);
  f.optional("runPolicy", out.runPolicy);
  f.optional("suspend", out.suspend);

  std::set<std::string> names, paths;
  for (size_t i = 0; datasets && i < out.datasets.size(); ++i) {
    const auto& d = out.datasets[i];
    if (!names.insert(d.name).second) {
      f.fail(config::expected(datasets->items()[i], "each dataset listed once"));
    }
    if (!paths.insert(d.mountPath).second) {
      f.fail(config::expected(datasets->items()[i], "a mountPath not used by another dataset"));
    }
  }
  if (checkpoints && out.checkpoints) {
    const std::string& path = out.checkpoints->mountPath;
    const auto nested = [](const std::string& a, const std::string& b) {
      return a == b || (a.starts_with(b) && (b.back() == '/' || a[b.size()] == '/'));
    };
    for (const auto& d : out.datasets)
      if (nested(path, d.mountPath) || nested(d.mountPath, path))
        f.fail(invalidArgument(checkpoints->where() + ".mountPath: " + path + " overlaps dataset " +
                               d.name + "'s mountPath " + d.mountPath +
                               "; give the checkpoints a path of their own, e.g. /checkpoints"));
  }
  if (out.warmPolicy == WarmStart::kBeforeStart && out.datasets.empty()) {
    f.fail(invalidArgument(node.where() + ".warmPolicy: BeforeStart needs at least one dataset"));
  }
  if (out.scheduling.locality == Locality::kRequired && out.datasets.empty()) {
    f.fail(invalidArgument(node.where() +
                           ".scheduling.locality: Required needs at least one dataset"));
  }
  return f.finish();
}

std::string_view warmStartName(WarmStart policy) {
  switch (policy) {
    case WarmStart::kParallel:
      return "Parallel";
    case WarmStart::kBeforeStart:
      return "BeforeStart";
    case WarmStart::kNone:
      return "None";
  }
  return "Parallel";
}

bool isPathInsideDataset(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path.front() == '/') return false;
  for (size_t start = 0; start <= path.size();) {
    const size_t end = std::min(path.find('/', start), path.size());
    if (path.compare(start, end - start, "..") == 0) return false;
    start = end + 1;
  }
  return true;
}

std::string workerName(const std::string& job, int rank) {
  return job + "-worker-" + std::to_string(rank);
}

std::vector<std::pair<std::string, std::string>> workerEnvironment(const TrainingJobSpec& spec,
                                                                   int rank,
                                                                   const std::string& masterAddress,
                                                                   int32_t masterPort) {
  const std::string port = std::to_string(masterPort);
  const std::string workers = std::to_string(spec.workers);
  const std::string rankText = std::to_string(rank);
  return {{"MASTER_ADDR", masterAddress},
          {"MASTER_PORT", port},
          {"WORLD_SIZE", workers},
          {"RANK", rankText},
          {"PET_NNODES", workers},
          {"PET_NPROC_PER_NODE", std::to_string(std::max(1, spec.gpusPerWorker))},
          {"PET_NODE_RANK", rankText},
          {"PET_MASTER_ADDR", masterAddress},
          {"PET_MASTER_PORT", port},
          {"PYTHONUNBUFFERED", "1"}};
}

}  // namespace granary::api
