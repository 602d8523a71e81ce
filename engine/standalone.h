// Standalone mode: Datasets from a manifest file (the CRD's shape) ensured on this node alone,
// without Kubernetes. Credentials come from the environment, as the AWS CLI reads them
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN; GRANARY_BEARER_TOKEN for
// http(s) origins), since there is no Secret to read.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/api/dataset.h"
#include "engine/engine.h"

namespace granary::cache {

// The Datasets of a manifest file or directory; other kinds are ignored. InvalidArgument
// naming file:line and field for bad documents, and when there is no Dataset at all.
Result<std::vector<api::Dataset>> loadDatasets(const std::filesystem::path& path);

// A source as this machine reaches it: with a secretRef, the credentials come from the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// GRANARY_BEARER_TOKEN), as the Secret would give them on a cluster.
SourceSpec localSourceSpec(const api::Source& source);

// The request that caches `dataset` on this node only.
EnsureSpec standaloneSpec(const api::Dataset& dataset);

// The directories of the datasets' file:// sources. Whoever names a manifest on the command line
// (standalone mode, granaryctl run and mount) allows what it names: these become file origin
// roots (OriginSettings::fileOriginRoots), and nothing else does.
std::vector<std::filesystem::path> fileSourcesOf(const std::vector<api::Dataset>& datasets);

// One line of progress: "ml/imagenet Warming 1204/5000 files 1.2 GiB/4.0 GiB (30%) 310 MiB/s ETA
// 9s". The rate (bytes fetched per second, WarmProgress::bytesPerSecond) is shown once it is
// known and not zero; the ETA only while the dataset is Warming and its rate is known, never on
// a Ready, Degraded, Failed or Pending one. Then the phase's message, in parentheses.
std::string progressLine(const DatasetKey& key, const DatasetState& state);

}  // namespace granary::cache
