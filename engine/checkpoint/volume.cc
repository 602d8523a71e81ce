#include "engine/checkpoint/volume.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "engine/checkpoint/origin_writer.h"

namespace granary::checkpoint {

DiskRoom roomOf(const std::filesystem::path& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0) return {};
  const auto total = static_cast<int64_t>(fs.f_blocks * fs.f_frsize);
  return {.free = static_cast<int64_t>(fs.f_bavail * fs.f_frsize),
          .margin = std::max(kFullMarginBytes, total / 100)};
}

std::string homeName(const std::string& key) {
  uint64_t hash = 14695981039346656037ull;
  for (const unsigned char c : key) hash = (hash ^ c) * 1099511628211ull;
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, hash);
  return text;
}

Result<std::unique_ptr<CheckpointVolume>> CheckpointVolume::open(
    const cache::SourceSpec& source, const cache::OriginSettings& settings,
    const VolumeOptions& options, Clock& clock, std::stop_token stop,
    const std::function<void(const RestoreProgress&)>& progress) {
  GRANARY_ASSIGN_OR_RETURN(auto writer, makeOriginWriter(source, settings));
  GRANARY_ASSIGN_OR_RETURN(auto origin, cache::makeOrigin(source, settings));
  const RestoreOptions where{.tree = options.home / "tree",
                             .recordFile = options.home / "record",
                             .staging = options.home / "restoring",
                             .peers = options.peers};
  std::error_code error;
  std::filesystem::create_directories(where.tree, error);
  if (error) return unavailable("cannot create " + where.tree.string() + ": " + error.message());
  GRANARY_ASSIGN_OR_RETURN(RestoreProgress restored, restoreTree(*origin, where, stop, progress));
  GRANARY_ASSIGN_OR_RETURN(
      auto drainer, Drainer::start({.tree = where.tree,
                                    .recordFile = where.recordFile,
                                    .bandwidthBytesPerSecond = options.bandwidthBytesPerSecond,
                                    .copies = options.copies},
                                   std::move(writer), clock));
  return std::unique_ptr<CheckpointVolume>(
      new CheckpointVolume(where.tree, restored, std::move(drainer)));
}

std::vector<PeerFile> CheckpointVolume::listing() const {
  std::vector<PeerFile> files;
  for (const TreeJournal::Listed& f : drainer_->listing())
    files.push_back({f.path, f.identity.size, f.identity.modifiedNanos, f.atOrigin});
  return files;
}

int64_t CheckpointVolume::makeRoom() {
  const DiskRoom room = roomOf(tree_);
  return room.full() ? drainer_->evict(2 * room.margin - room.free) : 0;
}

Status CheckpointVolume::takeNews(const CopyNews& news) {
  for (const auto& [path, version] : news.atOrigin)
    drainer_->copyAtOrigin(news.writer, path, version);
  for (const std::string& path : news.removed)
    GRANARY_RETURN_IF_ERROR(removeCopy(tree_, *drainer_, news.writer, path));
  if (news.dropHeld) return dropHeldCopies(tree_, *drainer_, news.writer);
  return Status::ok();
}

}  // namespace granary::checkpoint
