#include "cache-node/options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "common/origin_roots.h"

namespace granary::cache {

Status decodeValue(const config::Node& node, CacheDirectoryOptions& out) {
  config::Fields f(node);
  f.required(
      "path", out.path, [](const std::string& p) { return p.starts_with("/"); },
      "an absolute path");
  f.required(
      "quota", out.quota, [](const ByteSize& q) { return q.bytes > 0; },
      "a positive quantity such as 500Gi");
  return f.finish();
}

Status decodeValue(const config::Node& node, TlsOptions& out) {
  config::Fields f(node);
  f.optional("certificateFile", out.certificateFile);
  f.optional("keyFile", out.keyFile);
  f.optional("caFile", out.caFile);
  GRANARY_RETURN_IF_ERROR(f.finish());
  if (out.certificateFile.empty() != out.keyFile.empty()) {
    return invalidArgument(node.where() +
                           ": tls: give both certificateFile and keyFile, or neither");
  }
  return Status::ok();
}

namespace {

bool allAbsolute(const std::vector<std::string>& paths) {
  return std::all_of(paths.begin(), paths.end(),
                     [](const std::string& p) { return p.starts_with("/"); });
}

}  // namespace

Status decodeValue(const config::Node& node, NodeOptions& out) {
  config::Fields f(node);
  f.optional("nodeName", out.nodeName);
  f.optional("listen", out.listen);
  f.optional("transferListen", out.transferListen);
  f.optional(
      "transferConnectionsPerPeer", out.transferConnectionsPerPeer,
      [](int32_t c) { return c >= 1 && c <= 64; }, "an integer from 1 to 64");
  f.optional(
      "transferStallMs", out.transferStallMs, [](int32_t ms) { return ms >= 100 && ms <= 600'000; },
      "milliseconds from 100 to 600000");
  f.optional(
      "heldChunkMemory", out.heldChunkMemory,
      [](const ByteSize& s) { return s.bytes >= 0 && s.bytes <= (64LL << 30); },
      "a size up to 64Gi, 0 to hold none");
  f.optional("metricsAddress", out.metricsAddress);
  f.optional("tokenFile", out.tokenFile);
  f.optional("tls", out.tls);
  f.optional(
      "stateDirectory", out.stateDirectory, [](const std::string& p) { return !p.empty(); },
      "a directory");
  f.optional("cacheDirectories", out.cacheDirectories);
  f.optional(
      "chunkSize", out.chunkSize,
      [](const ByteSize& s) { return s.bytes >= (1 << 20) && s.bytes <= (1LL << 30); },
      "a size from 1Mi to 1Gi");
  f.optional(
      "warmConcurrency", out.warmConcurrency, [](int32_t c) { return c >= 1 && c <= 256; },
      "an integer from 1 to 256");
  f.optional(
      "listingConcurrency", out.listingConcurrency, [](int32_t c) { return c >= 1 && c <= 64; },
      "an integer from 1 to 64");
  f.optional(
      "bandwidthLimit", out.bandwidthLimit, [](const ByteSize& s) { return s.bytes >= 0; },
      "bytes per second, 0 unlimited");
  f.optional("verifyChecksumsAtStart", out.verifyChecksumsAtStart);
  f.optional("fileOriginRoots", out.fileOriginRoots);
  f.optional("checkpointOriginRoots", out.checkpointOriginRoots);
  f.optional("mountRoot", out.mountRoot);
  f.optional("csiSocket", out.csiSocket);
  f.optional("mountKeeper", out.mountKeeper);
  f.optional("mountKeeperSocket", out.mountKeeperSocket);
  f.optional(
      "mountKeeperWaitSeconds", out.mountKeeperWaitSeconds,
      [](int32_t s) { return s >= 0 && s <= 3600; }, "seconds from 0 to 3600");
  f.optional("sharedMounts", out.sharedMounts, allAbsolute, "a list of absolute directories");
  f.optional("passthrough", out.passthrough);
  f.optional(
      "passthroughMinAverageFileSize", out.passthroughMinAverageFileSize,
      [](const ByteSize& s) { return s.bytes >= 0; }, "a size, 0 for files of any size");
  f.optional("logLevel", out.logLevel);
  f.optional("gpuTelemetry", out.gpuTelemetry);
  f.optional(
      "gpuSampleIntervalMs", out.gpuSampleIntervalMs,
      [](int32_t ms) { return ms >= 100 && ms <= 60'000; }, "milliseconds from 100 to 60000");
  f.optional(
      "nvmlLibrary", out.nvmlLibrary, [](const std::string& p) { return !p.empty(); },
      "a library file name or path");
  f.optional("podResourcesSocket", out.podResourcesSocket);
  GRANARY_RETURN_IF_ERROR(f.finish());
  for (const auto& [option, roots] :
       {std::pair{"fileOriginRoots", &out.fileOriginRoots},
        std::pair{"checkpointOriginRoots", &out.checkpointOriginRoots}}) {
    if (auto parsed = parseOriginRoots(*roots, option); !parsed.isOk())
      return parsed.status().withContext(node.where());
  }
  return Status::ok();
}

void applyDefaults(NodeOptions& options) {
  if (options.nodeName.empty()) {
    if (const char* env = std::getenv("NODE_NAME"); env != nullptr && *env != '\0') {
      options.nodeName = env;
    } else {
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      options.nodeName = host;
    }
  }
  const std::filesystem::path state = options.stateDirectory;
  if (options.tokenFile.empty()) options.tokenFile = (state / "token").string();
  if (options.mountRoot.empty()) options.mountRoot = (state / "mounts").string();
  if (options.mountKeeperSocket.empty())
    options.mountKeeperSocket = (state / "mount-keeper.sock").string();
  if (options.cacheDirectories.empty())
    options.cacheDirectories.push_back({(state / "cache").string(), ByteSize{10LL << 30}});
}

EngineOptions engineOptionsOf(const NodeOptions& options) {
  EngineOptions engine;
  engine.nodeName = options.nodeName;
  engine.stateDirectory = options.stateDirectory;
  for (const auto& dir : options.cacheDirectories)
    engine.cacheDirectories.push_back({dir.path, dir.quota.bytes});
  engine.defaultChunkSize = options.chunkSize.bytes;
  engine.warmConcurrency = options.warmConcurrency;
  engine.listingConcurrency = options.listingConcurrency;
  engine.bandwidthLimit = options.bandwidthLimit.bytes;
  engine.verifyChecksumsAtStart = options.verifyChecksumsAtStart;
  engine.heldChunkBytes = options.heldChunkMemory.bytes;
  engine.origins = originSettingsOf(options.fileOriginRoots, "fileOriginRoots");
  return engine;
}

OriginSettings originSettingsOf(const std::vector<std::string>& roots, const std::string& option) {
  OriginSettings settings{.rootsOption = option};
  for (const auto& text : roots) {
    auto root = parseOriginRoot(text);
    if (!root.isOk()) continue;  // decodeValue refused it
    if (root->shared) {
      settings.fileOriginRoots.emplace_back(root->before);
    } else {
      settings.namespaceRoots.push_back(std::move(*root));
    }
  }
  return settings;
}

}  // namespace granary::cache
