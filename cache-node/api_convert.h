// Between the granary.v1 API messages and the engine's types. Pure.
#pragma once

#include "cache-node/csi/checkpoint_volumes.h"
#include "common/gpu/nvml.h"
#include "engine/dataset_cache.h"
#include "engine/engine.h"
#include "engine/gpu/gpu_totals.h"
#include "engine/mount/reader_accounting.h"
#include "granary/v1/cache_node.pb.h"

namespace granary::cache {

DatasetKey keyOf(const v1::DatasetRef& ref);
v1::DatasetRef refOf(const DatasetKey& key);

// InvalidArgument naming the request field (dataset.name, cache.policy, ...).
Result<EnsureSpec> ensureSpecOf(const v1::EnsureDatasetRequest& request);
// The view of a request with `view` set (its mounts, cache and node set unused).
ViewSpec viewSpecOf(const v1::EnsureDatasetRequest& request);
WarmPlan warmPlanOf(const v1::SetWarmPlanRequest& request);

v1::DatasetStatus statusOf(const DatasetKey& key, const DatasetState& state,
                           const std::string& nodeName);
v1::FileInfo fileInfoOf(const ManifestEntry& entry);
// A file as a peer's manifest holds it (its inode is this node's to give).
ManifestEntry manifestEntryOf(const v1::FileInfo& info);
v1::ReadCounters readCountersOf(const ReadTotals& reads);
v1::ReaderTelemetry readerTelemetryOf(const ReaderTotals& reader);
v1::ReadSource readSourceOf(Source source);
v1::GpuTelemetry gpuTelemetryOf(const gpu::GpuReading& reading, const GpuTotals& totals);
v1::CheckpointVolumeTelemetry checkpointTelemetryOf(const CheckpointVolumeState& volume);

}  // namespace granary::cache
