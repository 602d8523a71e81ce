#include "cli/local_checkpoints.h"

#include "common/quantity.h"
#include "engine/standalone.h"

namespace granary::cli {
namespace {

// The workers' path: a link to the tree (replacing one a previous run left).
Status link(const std::filesystem::path& tree, const std::filesystem::path& at) {
  std::error_code error;
  if (std::filesystem::is_symlink(at, error)) std::filesystem::remove(at, error);
  if (std::filesystem::exists(at, error))
    return failedPrecondition(at.string() +
                              " exists and is not granary's link; remove it or pass --run-dir");
  std::filesystem::create_directories(at.parent_path(), error);
  std::filesystem::create_directory_symlink(tree, at, error);
  if (error) return unavailable("cannot link " + at.string() + ": " + error.message());
  return Status::ok();
}

// The origin settings a local run uses for the uri: a file:// uri's directory (created when
// missing) is the one root it may write; credentials come from the environment.
Result<cache::OriginSettings> settingsFor(const api::Source& named,
                                          const cache::SourceSpec& source) {
  if (named.secretRef && source.uri.starts_with("s3://") &&
      (source.accessKeyId.empty() || source.secretAccessKey.empty()))
    return invalidArgument(
        "spec.checkpoints.secretRef: locally the credentials come from the environment; set "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones)");
  cache::OriginSettings settings;
  if (source.uri.starts_with("file:///")) {  // the directory the user named, only that
    const std::filesystem::path directory = source.uri.substr(7);
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    if (error)
      return invalidArgument("spec.checkpoints.uri: cannot create " + directory.string() + ": " +
                             error.message());
    settings.fileOriginRoots.push_back(directory);
  }
  return settings;
}

// "checkpoints /ckpt: 9 files (283Ki) restored from URI, 2 already here; at PATH (/ckpt in the
// job)".
std::string restoredLine(const LocalCheckpoints& checkpoints, const std::string& uri,
                         const checkpoint::RestoreProgress& restored) {
  std::string line = "checkpoints " + checkpoints.volume.mountPath + ": ";
  line += restored.files ? std::to_string(restored.files) + " files (" +
                               formatByteSize(ByteSize{restored.bytes}) + ") restored from "
                         : "nothing to restore from ";
  line += uri;
  if (restored.localFiles) line += ", " + std::to_string(restored.localFiles) + " already here";
  if (restored.removedFiles)
    line += ", " + std::to_string(restored.removedFiles) + " removed (gone from the origin)";
  return line + "; at " + checkpoints.localPath.string() + " (" + checkpoints.volume.mountPath +
         " in the job)";
}

}  // namespace

Result<std::unique_ptr<LocalCheckpointVolume>> LocalCheckpointVolume::open(
    const LocalCheckpoints& checkpoints, const std::filesystem::path& cacheDirectory, Clock& clock,
    std::stop_token stop, const Say& say) {
  const cache::SourceSpec source = cache::localSourceSpec(checkpoints.volume.source);
  GRANARY_ASSIGN_OR_RETURN(const cache::OriginSettings settings,
                           settingsFor(checkpoints.volume.source, source));
  const std::filesystem::path home =
      cacheDirectory / "checkpoints" / checkpoint::homeName(source.uri);
  std::error_code error;
  std::filesystem::create_directories(home / "tree", error);
  if (error) return unavailable("cannot create " + home.string() + ": " + error.message());
  GRANARY_RETURN_IF_ERROR(link(home / "tree", checkpoints.localPath));

  const std::string label = "checkpoints " + checkpoints.volume.mountPath;
  auto lastSaid = clock.monoNow();
  auto volume = checkpoint::CheckpointVolume::open(
      source, settings,
      {.home = home,
       .bandwidthBytesPerSecond = checkpoints.volume.bandwidthLimit.value_or(ByteSize{}).bytes},
      clock, stop, [&](const checkpoint::RestoreProgress& p) {
        if (clock.monoNow() - lastSaid < std::chrono::seconds(1)) return;
        lastSaid = clock.monoNow();
        say(label + ": restoring " + std::to_string(p.files) + "/" + std::to_string(p.totalFiles) +
            " files, " + formatByteSize(ByteSize{p.bytes}) + "/" +
            formatByteSize(ByteSize{p.totalBytes}) + " from " + source.uri);
      });
  if (!volume.isOk()) {
    if (volume.status().code() == StatusCode::kInvalidArgument)
      return volume.status().withContext("spec.checkpoints");
    const Status failed = volume.status().withContext(label + ": restoring from " + source.uri);
    if (failed.code() != StatusCode::kResourceExhausted) return failed;
    return Status(failed.code(), failed.message() + "; free space under --cache-dir " +
                                     cacheDirectory.string() + " or point it at a larger disk");
  }
  say(restoredLine(checkpoints, source.uri, (*volume)->restored()));
  return std::unique_ptr<LocalCheckpointVolume>(
      new LocalCheckpointVolume(checkpoints.volume.mountPath, std::move(*volume)));
}

void LocalCheckpointVolume::makeRoom(const Say& say) {
  if (const int64_t freed = volume_->makeRoom(); freed > 0)
    say("checkpoints " + mountPath_ + ": the disk is full; dropped " +
        formatByteSize(ByteSize{freed}) + " of checkpoints the origin holds, oldest first");
}

std::string LocalCheckpointVolume::progressLine() const {
  return checkpointLine(mountPath_, volume_->status());
}

bool LocalCheckpointVolume::drain(std::stop_token stop, const Say& say) {
  return volume_->waitDrained(stop, [&](const checkpoint::DrainStatus& s) {
    say(checkpointLine(mountPath_, s) +
        " (draining before the run ends; Ctrl-C leaves the rest "
        "for the next run)");
  });
}

std::string checkpointLine(const std::string& mountPath, const checkpoint::DrainStatus& s) {
  std::string line = "checkpoints " + mountPath + ": " + std::to_string(s.files) + " files";
  if (s.pendingFiles > 0)
    line += ", " + std::to_string(s.pendingFiles) + " to upload (" +
            formatByteSize(ByteSize{s.pendingBytes}) + "), lag " +
            std::to_string(static_cast<int64_t>(s.lag.count())) + "s";
  if (s.pendingRemovals > 0) line += ", " + std::to_string(s.pendingRemovals) + " to remove";
  if (s.writing > 0) line += ", " + std::to_string(s.writing) + " being written";
  if (!s.links.empty())
    line += ", " + std::to_string(s.links.size()) + " symlink(s) not drained (" + s.links.front() +
            (s.links.size() > 1 ? ", ..." : "") + ")";
  if (s.drained) line += ", all at the origin";
  line += "; " + formatByteSize(ByteSize{s.uploadedBytes}) + " uploaded";
  if (!s.lastError.empty()) line += " (retrying: " + s.lastError + ")";
  if (!s.checkpoints.empty()) {
    const auto& newest = s.checkpoints.front();
    line += "; newest " + newest.name + (newest.atOrigin ? " (at the origin)" : " (local only)");
  }
  return line;
}

}  // namespace granary::cli
