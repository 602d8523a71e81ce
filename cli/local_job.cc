#include "cli/local_job.h"

#include <algorithm>
#include <map>

namespace granary::cli {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

std::string namespaceOf(const api::ObjectMeta& meta) {
  return meta.namespace_.empty() ? "default" : meta.namespace_;
}

Result<api::TrainingJob> chooseJob(const std::vector<api::ManifestDocument>& documents,
                                   const std::string& name) {
  std::vector<const api::TrainingJob*> jobs;
  for (const auto& document : documents)
    if (const auto* job = std::get_if<api::TrainingJob>(&document.object))
      if (name.empty() || job->metadata.name == name) jobs.push_back(job);
  if (jobs.empty())
    return invalidArgument(name.empty()
                               ? "the manifests hold no TrainingJob; add one"
                               : "--job: the manifests hold no TrainingJob \"" + name + "\"");
  if (jobs.size() > 1)
    return invalidArgument("--job: the manifests hold several TrainingJobs; name one");
  return *jobs.front();
}

// Where `mountPath` is on this machine: below the run directory, which a ".." would leave.
Result<std::filesystem::path> underRunDirectory(const std::filesystem::path& runDirectory,
                                                const std::string& mountPath,
                                                const std::string& field) {
  for (const auto& segment : std::filesystem::path(mountPath))
    if (segment == "..")
      return invalidArgument(field + ": \"" + mountPath +
                             "\" has a \"..\" segment; local mode places the job's paths under "
                             "the run directory");
  return (runDirectory / std::filesystem::path(mountPath).relative_path()).lexically_normal();
}

Result<std::vector<LocalDataset>> chooseDatasets(
    const std::vector<api::ManifestDocument>& documents, const api::TrainingJob& job,
    const std::filesystem::path& runDirectory) {
  std::vector<LocalDataset> chosen;
  for (size_t i = 0; i < job.spec.datasets.size(); ++i) {
    const api::DatasetMount& mount = job.spec.datasets[i];
    const api::Dataset* found = nullptr;
    for (const auto& document : documents)
      if (const auto* d = std::get_if<api::Dataset>(&document.object))
        if (d->metadata.name == mount.name && namespaceOf(d->metadata) == namespaceOf(job.metadata))
          found = d;
    if (found == nullptr)
      return invalidArgument("spec.datasets[" + std::to_string(i) + "].name: Dataset " +
                             namespaceOf(job.metadata) + "/" + mount.name +
                             " is not in the manifests; add it to the file (or pass its file "
                             "with another -f)");
    GRANARY_ASSIGN_OR_RETURN(
        std::filesystem::path local,
        underRunDirectory(runDirectory, mount.mountPath,
                          "spec.datasets[" + std::to_string(i) + "].mountPath"));
    chosen.push_back({*found, mount.mountPath, std::move(local), mount.accessOrderFile});
  }
  return chosen;
}

// The strings of a list field ("" entries for what is not a string).
Result<std::vector<std::string>> stringsOf(const config::Node* list) {
  std::vector<std::string> out;
  if (list == nullptr) return out;
  if (!list->isList()) return config::expected(*list, "a list of strings");
  for (const auto& item : list->items()) {
    if (!item.isScalar()) return config::expected(item, "a string");
    out.push_back(item.scalar());
  }
  return out;
}

struct Container {
  std::vector<std::string> argv;
  Env env;
  std::string workingDir;
};

Result<Container> firstContainer(const api::TrainingJob& job) {
  const config::Node* spec = job.spec.template_.find("spec");
  const config::Node* containers = spec ? spec->find("containers") : nullptr;
  if (containers == nullptr || !containers->isList() || containers->items().empty())
    return invalidArgument(
        "spec.template.spec.containers: local mode runs the first container; "
        "add one");
  const config::Node& c = containers->items().front();
  Container out;
  GRANARY_ASSIGN_OR_RETURN(out.argv, stringsOf(c.find("command")));
  GRANARY_ASSIGN_OR_RETURN(auto args, stringsOf(c.find("args")));
  if (out.argv.empty())
    return invalidArgument(
        "spec.template.spec.containers[0].command: local mode runs the container's command "
        "(there is no image entrypoint on this machine); set it");
  out.argv.insert(out.argv.end(), args.begin(), args.end());
  if (const config::Node* dir = c.find("workingDir"); dir && dir->isScalar())
    out.workingDir = dir->scalar();
  if (const config::Node* env = c.find("env"); env != nullptr) {
    if (!env->isList()) return config::expected(*env, "a list of {name, value}");
    for (const auto& var : env->items()) {
      const config::Node* name = var.find("name");
      if (name == nullptr || !name->isScalar()) return config::expected(var, "a {name, value}");
      if (var.find("valueFrom") != nullptr)
        return invalidArgument(var.where() +
                               ".valueFrom: local mode has no Secrets, "
                               "ConfigMaps or pod fields; set value instead");
      const config::Node* value = var.find("value");
      out.env.emplace_back(name->scalar(), value && value->isScalar() ? value->scalar() : "");
    }
  }
  return out;
}

std::string joined(const std::vector<int>& numbers) {
  std::string out;
  for (int n : numbers) out += (out.empty() ? "" : ",") + std::to_string(n);
  return out;
}

auto lookupIn(const std::map<std::string, std::string>& defined) {
  return [&defined](std::string_view name) -> std::optional<std::string> {
    const auto it = defined.find(std::string(name));
    return it == defined.end() ? std::nullopt : std::optional(it->second);
  };
}

// The container's env, then the job's for names the container leaves unset, with $(VAR)
// expanded as Kubernetes does: an env value sees the variables before it.
Env workerEnv(const Container& container, const Env& job) {
  Env env;
  std::map<std::string, std::string> defined;
  const auto add = [&](const std::string& name, const std::string& value) {
    const std::string expanded = expandReferences(value, lookupIn(defined));
    defined[name] = expanded;
    env.emplace_back(name, expanded);
  };
  for (const auto& [name, value] : container.env) add(name, value);
  for (const auto& [name, value] : job)
    if (!defined.contains(name)) add(name, value);
  return env;
}

std::string rendezvousId(const api::TrainingJob& job) {
  const std::string& ns = job.metadata.namespace_;
  return (ns.empty() ? "default" : ns) + "-" + job.metadata.name;
}

LocalWorker planWorker(const LocalPlan& plan, const Container& container,
                       const LocalRunOptions& options, int rank) {
  const api::TrainingJobSpec& spec = plan.job.spec;
  LocalWorker worker{.rank = rank, .name = api::workerName(plan.job.metadata.name, rank)};
  for (int g = 0; g < spec.gpusPerWorker; ++g) worker.gpus.push_back(rank * spec.gpusPerWorker + g);
  const api::Rendezvous meet{.masterAddress = "127.0.0.1",
                             .masterPort = options.masterPort,
                             .endpoint = "127.0.0.1:" + std::to_string(options.rendezvousPort),
                             .id = rendezvousId(plan.job)};
  Env job = api::workerEnvironment(spec, rank, meet);
  job.emplace_back("LOCAL_RANK", std::to_string(rank));
  job.emplace_back("GRANARY_RUN_DIR", options.runDirectory.string());
  job.emplace_back("CUDA_VISIBLE_DEVICES", joined(worker.gpus));
  job.emplace_back("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
  worker.env = workerEnv(container, job);
  for (auto& [name, value] : worker.env) value = mapMountPaths(value, plan.paths);

  std::map<std::string, std::string> defined(worker.env.begin(), worker.env.end());
  for (const auto& arg : container.argv) {
    worker.argv.push_back(mapMountPaths(expandReferences(arg, lookupIn(defined)), plan.paths));
  }
  if (!container.workingDir.empty())
    worker.workingDirectory = mapMountPaths(container.workingDir, plan.paths);
  return worker;
}

// spec.workers, and for an elastic job the ranks up to maxWorkers that the machine's GPUs leave
// room for (all of them without GPUs), as a cluster grows the job where capacity allows.
int plannedWorkers(const api::TrainingJobSpec& spec, int gpuCount) {
  if (!spec.elastic) return spec.workers;
  if (spec.gpusPerWorker == 0) return spec.elastic->maxWorkers;
  return std::clamp(gpuCount / spec.gpusPerWorker, spec.workers, spec.elastic->maxWorkers);
}

}  // namespace

std::string expandReferences(
    std::string_view text,
    const std::function<std::optional<std::string>(std::string_view name)>& lookup) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$' || i + 1 >= text.size()) {
      out += text[i];
    } else if (text[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (text[i + 1] == '(') {
      const size_t close = text.find(')', i + 2);
      const auto value = close == std::string_view::npos
                             ? std::nullopt
                             : lookup(text.substr(i + 2, close - i - 2));
      if (!value) {
        out += text[i];
        continue;
      }
      out += *value;
      i = close;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string mapMountPaths(const std::string& text, const std::vector<PathMapping>& paths) {
  const auto separates = [](char c, std::string_view separators) {
    return separators.find(c) != std::string_view::npos;
  };
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const PathMapping* found = nullptr;
    if (i == 0 || separates(text[i - 1], " \t='\":,"))
      for (const auto& d : paths) {
        const size_t end = i + d.mountPath.size();
        if (text.compare(i, d.mountPath.size(), d.mountPath) == 0 &&
            (end == text.size() || separates(text[end], "/ \t'\":,;"))) {
          found = &d;
          break;
        }
      }
    if (found == nullptr) {
      out += text[i++];
      continue;
    }
    out += found->localPath.string();
    i += found->mountPath.size();
  }
  return out;
}

Result<LocalPlan> planLocalRun(const std::vector<api::ManifestDocument>& documents,
                               const LocalRunOptions& options) {
  LocalPlan plan{.runDirectory = options.runDirectory};
  GRANARY_ASSIGN_OR_RETURN(plan.job, chooseJob(documents, options.jobName));
  GRANARY_ASSIGN_OR_RETURN(plan.datasets,
                           chooseDatasets(documents, plan.job, options.runDirectory));
  const api::TrainingJobSpec& spec = plan.job.spec;
  for (const auto& d : plan.datasets) plan.paths.push_back({d.mountPath, d.localPath});
  if (const auto& checkpoints = spec.checkpoints) {
    GRANARY_ASSIGN_OR_RETURN(std::filesystem::path local,
                             underRunDirectory(options.runDirectory, checkpoints->mountPath,
                                               "spec.checkpoints.mountPath"));
    plan.checkpoints = LocalCheckpoints{*checkpoints, local};
    plan.paths.push_back({checkpoints->mountPath, std::move(local)});
  }
  // Longest mount path first, so /data/a/b is mapped before /data/a.
  std::sort(plan.paths.begin(), plan.paths.end(),
            [](const auto& a, const auto& b) { return a.mountPath.size() > b.mountPath.size(); });
  const int64_t gpusNeeded = int64_t{spec.workers} * spec.gpusPerWorker;
  if (gpusNeeded > options.gpuCount)
    return invalidArgument("spec.gpusPerWorker: " + std::to_string(spec.workers) + " workers x " +
                           std::to_string(spec.gpusPerWorker) + " GPUs need " +
                           std::to_string(gpusNeeded) + " GPUs; this machine has " +
                           std::to_string(options.gpuCount) +
                           (options.noGpuReason.empty() ? "" : " (" + options.noGpuReason + ")") +
                           ". Lower spec.workers or spec.gpusPerWorker (0 runs without GPUs)");
  GRANARY_ASSIGN_OR_RETURN(const Container container, firstContainer(plan.job));
  const int planned = plannedWorkers(spec, options.gpuCount);
  for (int rank = 0; rank < planned; ++rank)
    plan.workers.push_back(planWorker(plan, container, options, rank));
  if (spec.elastic) {
    LocalWorker store = plan.workers.front();
    store.name = plan.job.metadata.name + "-rendezvous";
    store.argv = api::rendezvousStoreCommand(options.rendezvousPort, options.rendezvousNoticePort);
    store.workingDirectory.clear();
    store.gpus.clear();
    store.env.emplace_back(api::kRendezvousTokenEnv, options.rendezvousToken);
    plan.rendezvous = std::move(store);
    plan.rendezvousToken = options.rendezvousToken;
    plan.rendezvousId = rendezvousId(plan.job);
    plan.rendezvousNotices = "127.0.0.1:" + std::to_string(options.rendezvousNoticePort);
  }
  return plan;
}

}  // namespace granary::cli
