#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/api/manifest.h"

namespace granary::cli {
namespace {

std::string qualifiedName(const api::ObjectMeta& meta) {
  return (meta.namespace_.empty() ? "default" : meta.namespace_) + "/" + meta.name;
}

void describe(const api::Dataset& ds) {
  std::string sources;
  for (const auto& mount : ds.spec.mounts) {
    if (!sources.empty()) sources += ", ";
    if (!mount.name.empty()) sources += mount.name + "=";
    sources += mount.source.uri;
  }
  if (const auto& reference = ds.spec.reference) {
    sources =
        "dataset://" + reference->key() + (reference->path.empty() ? "" : "/" + reference->path);
  }
  for (size_t i = 0; i < ds.spec.sharing.namespaces.size(); ++i)
    sources += (i ? ", " : " (offered to ") + ds.spec.sharing.namespaces[i];
  if (!ds.spec.sharing.namespaces.empty()) sources += ")";
  const auto& cache = ds.spec.cache;
  std::printf("  Dataset      %-28s %s\n", qualifiedName(ds.metadata).c_str(), sources.c_str());
  if (ds.spec.reference) {
    std::printf("               a read-only view, cached by its source's settings\n");
    return;
  }
  std::printf(
      "               policy=%s warm=%s replicas=%d chunk=%s capacity/node=%s "
      "bandwidth=%s\n",
      std::string(api::evictionPolicyName(cache.policy)).c_str(),
      std::string(api::warmPolicyName(cache.warm)).c_str(), cache.replicas,
      formatByteSize(cache.chunkSize).c_str(),
      cache.capacityPerNode ? formatByteSize(*cache.capacityPerNode).c_str() : "node default",
      cache.bandwidthLimit ? (formatByteSize(*cache.bandwidthLimit) + "/s").c_str() : "unlimited");
}

void describe(const api::TrainingJob& job) {
  std::string datasets;
  for (const auto& d : job.spec.datasets) {
    if (!datasets.empty()) datasets += ", ";
    datasets += d.name + " at " + d.mountPath;
  }
  std::printf("  TrainingJob  %-28s %d workers x %d GPUs, warm %s\n",
              qualifiedName(job.metadata).c_str(), job.spec.workers, job.spec.gpusPerWorker,
              std::string(api::warmStartName(job.spec.warmPolicy)).c_str());
  std::printf("               datasets: %s\n", datasets.empty() ? "none" : datasets.c_str());
  if (const auto& c = job.spec.checkpoints)
    std::printf(
        "               checkpoints: %s at %s, uploads %s, %d peer cop%s a file\n",
        c->source.uri.c_str(), c->mountPath.c_str(),
        c->bandwidthLimit ? (formatByteSize(*c->bandwidthLimit) + "/s").c_str() : "unlimited",
        c->copies, c->copies == 1 ? "y" : "ies");
  if (const auto& e = job.spec.elastic)
    std::printf(
        "               elastic: %d to %d workers; a lost worker is replaced alone while %d "
        "remain\n",
        e->minWorkers, e->maxWorkers, e->minWorkers);
}

void describe(const api::OtherObject& other) {
  std::printf("  %-12s %-28s (not a granary resource; skipped)\n", other.kind.c_str(),
              other.name.c_str());
}

}  // namespace

int validateCommand(const std::vector<std::string>& args) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "-f" || args[i] == "--filename") && i + 1 < args.size()) {
      paths.push_back(args[++i]);
    } else {
      std::fprintf(stderr, "granaryctl validate: unexpected argument \"%s\"; use -f PATH\n",
                   args[i].c_str());
      return 2;
    }
  }
  if (paths.empty()) {
    std::fprintf(stderr, "granaryctl validate: name at least one manifest with -f PATH\n");
    return 2;
  }

  int failed = 0;
  size_t valid = 0;
  for (const auto& path : paths) {
    auto documents = api::loadManifests(path);
    if (!documents.isOk()) {
      std::fprintf(stderr, "%s\n", documents.status().message().c_str());
      ++failed;
      continue;
    }
    if (documents->empty()) {
      std::fprintf(stderr, "%s: no manifests found (looked for *.yaml, *.yml, *.json)\n",
                   path.c_str());
      ++failed;
      continue;
    }
    for (const auto& document : *documents) {
      std::printf("%s\n", document.where.c_str());
      std::visit([](const auto& object) { describe(object); }, document.object);
      valid += std::holds_alternative<api::OtherObject>(document.object) ? 0 : 1;
    }
  }
  std::printf("%zu granary resources valid; %d path(s) with errors\n", valid, failed);
  return failed ? 1 : 0;
}

}  // namespace granary::cli
