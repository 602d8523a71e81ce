#include "cache-node/api_convert.h"

#include <google/protobuf/util/time_util.h>

namespace granary::cache {

DatasetKey keyOf(const v1::DatasetRef& ref) {
  return {ref.namespace_(), ref.name(), ref.generation(), ref.uid()};
}

v1::DatasetRef refOf(const DatasetKey& key) {
  v1::DatasetRef ref;
  ref.set_namespace_(key.ns);
  ref.set_name(key.name);
  ref.set_generation(key.generation);
  ref.set_uid(key.uid);
  return ref;
}

ViewSpec viewSpecOf(const v1::EnsureDatasetRequest& request) {
  return {keyOf(request.dataset()), keyOf(request.view().source()), request.view().path()};
}

Result<EnsureSpec> ensureSpecOf(const v1::EnsureDatasetRequest& request) {
  EnsureSpec spec;
  spec.key = keyOf(request.dataset());
  for (const auto& mount : request.mounts()) {
    const auto& source = mount.source();
    const auto& credentials = mount.credentials();
    spec.mounts.push_back(
        {mount.name(), SourceSpec{.uri = source.uri(),
                                  .endpoint = source.endpoint(),
                                  .region = source.region(),
                                  .options = {source.options().begin(), source.options().end()},
                                  .accessKeyId = Secret(credentials.access_key_id()),
                                  .secretAccessKey = Secret(credentials.secret_access_key()),
                                  .sessionToken = Secret(credentials.session_token()),
                                  .bearerToken = Secret(credentials.bearer_token())}});
  }
  const auto& cache = request.cache();
  DatasetSettings& settings = spec.settings;
  settings.replicas = cache.replicas() == 0 ? 1 : static_cast<int>(cache.replicas());
  if (cache.capacity_bytes() < 0) return invalidArgument("cache.capacity_bytes: must be >= 0");
  settings.capacityBytes = cache.capacity_bytes();
  if (cache.chunk_size_bytes() < 0) return invalidArgument("cache.chunk_size_bytes: must be >= 0");
  settings.chunkSize = cache.chunk_size_bytes();
  if (cache.bandwidth_limit_bytes_per_second() < 0)
    return invalidArgument("cache.bandwidth_limit_bytes_per_second: must be >= 0");
  settings.bandwidthLimit = cache.bandwidth_limit_bytes_per_second();
  switch (cache.policy()) {
    case v1::EVICTION_POLICY_UNSPECIFIED:
    case v1::EVICTION_POLICY_PIN:
      settings.eviction = Eviction::kPin;
      break;
    case v1::EVICTION_POLICY_LRU:
      settings.eviction = Eviction::kLru;
      break;
    default:
      return invalidArgument("cache.policy: must be PIN or LRU");
  }
  switch (cache.warm()) {
    case v1::WARM_MODE_UNSPECIFIED:
    case v1::WARM_MODE_ON_CREATE:
      settings.warm = WarmMode::kOnCreate;
      break;
    case v1::WARM_MODE_ON_JOB:
      settings.warm = WarmMode::kOnJob;
      break;
    case v1::WARM_MODE_NEVER:
      settings.warm = WarmMode::kNever;
      break;
    default:
      return invalidArgument("cache.warm: must be ON_CREATE, ON_JOB or NEVER");
  }
  settings.warmConcurrency = 0;  // the node's
  for (const auto& node : request.node_set()) {
    if (node.node_name().empty()) return invalidArgument("node_set[].node_name: must be set");
    settings.nodeSet.push_back(node.node_name());
  }
  return spec;
}

WarmPlan warmPlanOf(const v1::SetWarmPlanRequest& request) {
  return {.accessOrder = {request.access_order().begin(), request.access_order().end()},
          .accessOrderFile = request.access_order_file(),
          .paused = request.paused(),
          .hasReaders = request.readers_size() > 0,
          .priority = request.priority()};
}

namespace {

v1::DatasetPhase phaseOf(Phase phase) {
  switch (phase) {
    case Phase::kPending:
      return v1::DATASET_PHASE_PENDING;
    case Phase::kListing:
      return v1::DATASET_PHASE_LISTING;
    case Phase::kWarming:
      return v1::DATASET_PHASE_WARMING;
    case Phase::kReady:
      return v1::DATASET_PHASE_READY;
    case Phase::kDegraded:
      return v1::DATASET_PHASE_DEGRADED;
    case Phase::kFailed:
      return v1::DATASET_PHASE_FAILED;
    case Phase::kOnDemand:
      return v1::DATASET_PHASE_ON_DEMAND;
    case Phase::kQuotaFull:
      return v1::DATASET_PHASE_QUOTA_FULL;
  }
  return v1::DATASET_PHASE_UNSPECIFIED;
}

}  // namespace

v1::DatasetStatus statusOf(const DatasetKey& key, const DatasetState& state,
                           const std::string& nodeName) {
  using google::protobuf::util::TimeUtil;
  v1::DatasetStatus out;
  *out.mutable_dataset() = refOf(key);
  out.set_phase(phaseOf(state.phase));
  out.set_message(state.message);
  out.set_node_name(nodeName);
  out.set_capacity_bytes(state.capacityBytes);
  out.set_used_bytes(state.usedBytes);
  for (const auto& path : state.goneFromOrigin) out.add_gone_from_origin(path);
  auto& p = *out.mutable_progress();
  const WarmProgress& w = state.progress;
  p.set_total_files(w.totalFiles);
  p.set_total_bytes(w.totalBytes);
  p.set_owned_files(w.ownedFiles);
  p.set_owned_bytes(w.ownedBytes);
  p.set_cached_files(w.cachedFiles);
  p.set_cached_bytes(w.cachedBytes);
  p.set_bytes_per_second(w.bytesPerSecond);
  p.set_eta_seconds(w.etaSeconds);
  if (w.warmStart != Clock::WallTime{}) {
    *p.mutable_warm_start_time() = TimeUtil::NanosecondsToTimestamp(
        std::chrono::duration_cast<std::chrono::nanoseconds>(w.warmStart.time_since_epoch())
            .count());
  }
  *out.mutable_reads() = readCountersOf(state.reads);
  return out;
}

v1::ReadCounters readCountersOf(const ReadTotals& reads) {
  v1::ReadCounters r;
  r.set_local_bytes(reads.localBytes);
  r.set_peer_bytes(reads.peerBytes);
  r.set_origin_bytes(reads.originBytes);
  r.set_chunk_hits(reads.chunkHits);
  r.set_chunk_misses(reads.chunkMisses);
  return r;
}

v1::ReaderTelemetry readerTelemetryOf(const ReaderTotals& reader) {
  v1::ReaderTelemetry out;
  const std::string& dataset = reader.key.dataset;
  const size_t slash = dataset.find('/');
  out.mutable_dataset()->set_namespace_(dataset.substr(0, slash));
  out.mutable_dataset()->set_name(slash == std::string::npos ? "" : dataset.substr(slash + 1));
  out.set_pod_namespace(reader.podNamespace);
  out.set_pod_name(reader.podName);
  out.set_pod_uid(reader.key.podUid);
  out.set_pid(reader.key.pid);
  out.set_read_wait_seconds(std::chrono::duration<double>(reader.wait).count());
  *out.mutable_reads() = readCountersOf(reader.reads);
  out.set_read_operations(reader.operations);
  return out;
}

v1::FileInfo fileInfoOf(const ManifestEntry& entry) {
  v1::FileInfo info;
  info.set_path(entry.path);
  info.set_size(entry.size);
  info.set_mode(entry.mode);
  info.set_is_directory(entry.directory);
  info.set_etag(entry.etag);
  *info.mutable_modified() =
      google::protobuf::util::TimeUtil::NanosecondsToTimestamp(entry.modifiedUnixNanos);
  return info;
}

ManifestEntry manifestEntryOf(const v1::FileInfo& info) {
  return {.path = info.path(),
          .size = info.size(),
          .etag = info.etag(),
          .modifiedUnixNanos =
              google::protobuf::util::TimeUtil::TimestampToNanoseconds(info.modified()),
          .mode = info.mode(),
          .directory = info.is_directory()};
}

v1::ReadSource readSourceOf(Source source) {
  switch (source) {
    case Source::kLocal:
      return v1::READ_SOURCE_LOCAL;
    case Source::kPeer:
      return v1::READ_SOURCE_PEER;
    case Source::kOrigin:
      return v1::READ_SOURCE_ORIGIN;
  }
  return v1::READ_SOURCE_UNSPECIFIED;
}

v1::GpuTelemetry gpuTelemetryOf(const gpu::GpuReading& reading, const GpuTotals& totals) {
  v1::GpuTelemetry out;
  out.set_index(reading.index);
  out.set_uuid(reading.uuid);
  out.set_model_name(reading.name);
  out.set_lost(reading.lost);
  out.set_pod_namespace(reading.podNamespace);
  out.set_pod_name(reading.podName);
  out.set_container(reading.container);
  if (reading.utilization) out.set_utilization_ratio(*reading.utilization);
  if (reading.memoryUtilization) out.set_memory_utilization_ratio(*reading.memoryUtilization);
  if (reading.memoryUsedBytes) out.set_memory_used_bytes(*reading.memoryUsedBytes);
  if (reading.memoryTotalBytes) out.set_memory_total_bytes(*reading.memoryTotalBytes);
  if (reading.powerWatts) out.set_power_watts(*reading.powerWatts);
  if (reading.temperatureCelsius) out.set_temperature_celsius(*reading.temperatureCelsius);
  if (reading.smClockHertz) out.set_sm_clock_hertz(*reading.smClockHertz);
  if (reading.pcieTransmitBytesPerSecond)
    out.set_pcie_transmit_bytes_per_second(*reading.pcieTransmitBytesPerSecond);
  if (reading.pcieReceiveBytesPerSecond)
    out.set_pcie_receive_bytes_per_second(*reading.pcieReceiveBytesPerSecond);
  if (reading.smActivity) out.set_sm_activity_ratio(*reading.smActivity);
  if (reading.tensorActivity) out.set_tensor_activity_ratio(*reading.tensorActivity);
  out.set_sampled_seconds(totals.sampledSeconds);
  out.set_busy_seconds(totals.busySeconds);
  out.set_memory_used_byte_seconds(totals.memoryByteSeconds);
  for (const auto& process : reading.processes) {
    auto* p = out.add_processes();
    p->set_pid(process.pid);
    if (process.memoryUsedBytes) p->set_memory_used_bytes(*process.memoryUsedBytes);
    if (process.smUtilization) p->set_sm_utilization_ratio(*process.smUtilization);
  }
  return out;
}

v1::CheckpointVolumeTelemetry checkpointTelemetryOf(const CheckpointVolumeState& volume) {
  v1::CheckpointVolumeTelemetry t;
  t.set_namespace_(volume.ns);
  t.set_uri(volume.uri);
  t.set_pods(volume.pods);
  t.set_restoring(volume.restoring.has_value());
  t.set_disk_free_bytes(volume.diskFreeBytes);
  t.set_disk_full(volume.diskFull);
  if (!volume.drain) return t;
  const checkpoint::DrainStatus& d = *volume.drain;
  t.set_pending_files(d.pendingFiles);
  t.set_pending_bytes(d.pendingBytes);
  t.set_upload_lag_seconds(d.lag.count());
  t.set_written_bytes(d.writtenBytes);
  t.set_uploaded_bytes(d.uploadedBytes);
  t.set_copied_bytes(d.copiedBytes);
  t.set_held_files(d.heldFiles);
  t.set_last_error(d.lastError);
  for (const checkpoint::CheckpointCopies& c : d.checkpoints) {
    v1::CheckpointTelemetry& out = *t.add_checkpoints();
    out.set_name(c.name);
    out.set_files(c.files);
    out.set_bytes(c.bytes);
    out.set_at_origin(c.atOrigin);
    out.set_on_peer(c.onPeer);
  }
  return t;
}

}  // namespace granary::cache
