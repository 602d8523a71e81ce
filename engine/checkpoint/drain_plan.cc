#include "engine/checkpoint/drain_plan.h"

#include <algorithm>
#include <array>
#include <limits>

namespace granary::checkpoint {
namespace {

std::string_view baseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string_view topLevel(std::string_view path) { return path.substr(0, path.find('/')); }

// The directory a path is in ("" for the tree's root).
std::string_view directoryOf(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

// Whether a marker speaks for `path`: a file of its directory, or below it unless the marker is
// at the tree's root (where `latest` names a checkpoint rather than describing files).
bool inScopeOf(std::string_view marker, std::string_view path) {
  const std::string_view directory = directoryOf(marker);
  if (directory.empty()) return directoryOf(path).empty();
  return path.size() > directory.size() && path.starts_with(directory) &&
         path[directory.size()] == '/';
}

bool atOrigin(const DrainObservation& o, const TreeFile& file) {
  const auto it = o.origin.find(file.path);
  return it != o.origin.end() && it->second == file.seq;
}

bool onPeers(const DrainObservation& o, const TreeFile& file, int wanted) {
  const auto it = o.peers.find(file.path);
  return it != o.peers.end() && it->second.first == file.seq && it->second.second >= wanted;
}

// The closed files not at the origin (in the order they were closed), and whether each waits
// for the ones before it.
struct Pending {
  std::vector<const TreeFile*> files;  // by seq
  // The smallest seq of a pending file that is not a marker, and of one that is.
  uint64_t firstFile = std::numeric_limits<uint64_t>::max();
  uint64_t firstMarker = std::numeric_limits<uint64_t>::max();
  // The smallest seq of a removal of a marker not carried out yet.
  uint64_t firstMarkerRemoval = std::numeric_limits<uint64_t>::max();

  // A marker goes once no other file closed before it, or renamed into place with it, is
  // pending; a removal once no file closed before it is.
  bool markerHeld(const TreeFile& marker) const {
    return firstFile <= marker.seq || firstMarker < marker.seq;
  }
  // A removal goes once no file closed before it is pending, but for a marker that speaks for
  // the removed path (that marker waits for the removal instead); one of a file that is not a
  // marker also waits for the markers removed before or with it, so that a checkpoint rotated
  // away stops looking complete before its files go.
  bool removalHeld(const TreeRemoval& removal) const {
    if (firstFile < removal.seq) return true;
    if (!isCompletionMarker(removal.path) && firstMarkerRemoval <= removal.seq) return true;
    return std::any_of(files.begin(), files.end(), [&](const TreeFile* f) {
      return f->seq < removal.seq && isCompletionMarker(f->path) &&
             !inScopeOf(f->path, removal.path);
    });
  }
};

Pending pendingOf(const DrainObservation& o) {
  Pending pending;
  for (const TreeFile& file : o.closed) {
    if (atOrigin(o, file)) continue;
    pending.files.push_back(&file);
    uint64_t& first = isCompletionMarker(file.path) ? pending.firstMarker : pending.firstFile;
    first = std::min(first, file.seq);
  }
  std::sort(pending.files.begin(), pending.files.end(),
            [](const TreeFile* a, const TreeFile* b) { return a->seq < b->seq; });
  for (const TreeRemoval& removal : o.removals)
    if (isCompletionMarker(removal.path))
      pending.firstMarkerRemoval = std::min(pending.firstMarkerRemoval, removal.seq);
  return pending;
}

// Whether a file the marker speaks for is open for writing, or (`pending`) is another file not
// yet where the marker is going: its checkpoint is not whole there yet.
bool incompleteInScope(const DrainObservation& o, const std::string& marker,
                       const std::vector<const TreeFile*>& pending) {
  return std::any_of(o.writing.begin(), o.writing.end(),
                     [&](const std::string& path) { return inScopeOf(marker, path); }) ||
         std::any_of(pending.begin(), pending.end(), [&](const TreeFile* f) {
           return !isCompletionMarker(f->path) && inScopeOf(marker, f->path);
         });
}

bool isUnderway(const DrainObservation& o, const DrainStep& step) {
  return std::find(o.underway.begin(), o.underway.end(), step) != o.underway.end();
}

bool isAtOriginSide(DrainStep::Kind kind) {
  return kind == DrainStep::Kind::kUpload || kind == DrainStep::Kind::kRemove;
}

int countUnderway(const std::vector<DrainStep>& steps, bool atOriginSide) {
  return static_cast<int>(std::count_if(steps.begin(), steps.end(), [&](const DrainStep& s) {
    return isAtOriginSide(s.kind) == atOriginSide;
  }));
}

// Steps under way for a version the tree no longer holds (removed, or closed again since).
void abandonStale(const DrainObservation& o, const std::map<std::string, const TreeFile*>& byPath,
                  DrainPlan& plan) {
  for (const DrainStep& step : o.underway) {
    if (step.kind == DrainStep::Kind::kRemove || step.kind == DrainStep::Kind::kUncopy) continue;
    const auto it = byPath.find(step.path);
    if (it == byPath.end() || it->second->seq != step.seq || o.writing.contains(step.path))
      plan.abandon.push_back(step);
  }
}

// Uploads and removals at the origin, merged in the order of their seqs.
void planOrigin(const DrainObservation& o, const std::map<std::string, const TreeFile*>& byPath,
                const Pending& pending, DrainPlan& plan) {
  std::vector<TreeRemoval> removals;  // those with something to do at the origin
  for (const TreeRemoval& removal : o.removals) {
    const bool heldAgain = byPath.contains(removal.path) || o.writing.contains(removal.path);
    const bool uploading = std::any_of(o.underway.begin(), o.underway.end(), [&](const auto& s) {
      return s.kind == DrainStep::Kind::kUpload && s.path == removal.path;
    });
    if (heldAgain || (!o.origin.contains(removal.path) && !uploading)) {
      plan.settled.push_back(removal);
    } else {
      removals.push_back(removal);
    }
  }
  const auto removingIn = [&](const std::string& marker) {
    return std::any_of(removals.begin(), removals.end(), [&](const TreeRemoval& r) {
      return r.path != marker && inScopeOf(marker, r.path);
    });
  };

  std::vector<std::pair<uint64_t, DrainStep>> candidates;
  for (const TreeFile* file : pending.files) {
    if (o.writing.contains(file->path) || o.held.contains(file->path)) continue;
    if (isCompletionMarker(file->path) && (pending.markerHeld(*file) || removingIn(file->path) ||
                                           incompleteInScope(o, file->path, pending.files))) {
      ++plan.heldMarkers;
      continue;
    }
    candidates.push_back({file->seq, {DrainStep::Kind::kUpload, file->path, file->seq}});
  }
  for (const TreeRemoval& removal : removals) {
    if (pending.removalHeld(removal)) continue;
    // A file a marker at the origin speaks for goes only once that marker is gone there: the
    // marker is taken down first (uploaded again afterwards if the tree still holds it).
    if (!isCompletionMarker(removal.path)) {
      const auto marker = std::find_if(o.origin.begin(), o.origin.end(), [&](const auto& held) {
        return isCompletionMarker(held.first) && inScopeOf(held.first, removal.path);
      });
      if (marker != o.origin.end()) {
        const bool removing = std::any_of(removals.begin(), removals.end(),
                                          [&](const auto& r) { return r.path == marker->first; });
        if (!removing)
          candidates.push_back(
              {removal.seq, {DrainStep::Kind::kRemove, marker->first, marker->second}});
        continue;
      }
    }
    candidates.push_back({removal.seq, {DrainStep::Kind::kRemove, removal.path, removal.seq}});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  int room = o.maxUploads - countUnderway(o.underway, true);
  for (auto& candidate : candidates) {
    DrainStep& step = candidate.second;
    if (room <= 0) break;
    if (isUnderway(o, step) ||
        std::find(plan.start.begin(), plan.start.end(), step) != plan.start.end())
      continue;
    // A removal whose path an earlier upload still writes waits for it to end (or be abandoned).
    if (step.kind == DrainStep::Kind::kRemove &&
        std::any_of(o.underway.begin(), o.underway.end(),
                    [&](const DrainStep& s) { return s.path == step.path; }))
      continue;
    plan.start.push_back(std::move(step));
    --room;
  }
}

void planCopies(const DrainObservation& o, DrainPlan& plan) {
  int room = o.maxCopies - countUnderway(o.underway, false);
  std::set<std::string> uncopying;
  for (const TreeRemoval& removal : o.uncopies) {
    uncopying.insert(removal.path);
    const DrainStep step{DrainStep::Kind::kUncopy, removal.path, removal.seq};
    if (room <= 0 || isUnderway(o, step)) continue;
    plan.start.push_back(step);
    --room;
  }
  if (o.copies <= 0) return;
  std::vector<const TreeFile*> wanted, notOnPeers;
  uint64_t firstFile = std::numeric_limits<uint64_t>::max();  // of those not markers
  for (const TreeFile& file : o.closed) {
    if (o.held.contains(file.path) || onPeers(o, file, o.copies)) continue;
    notOnPeers.push_back(&file);
    if (!isCompletionMarker(file.path)) firstFile = std::min(firstFile, file.seq);
    if (!o.writing.contains(file.path) && !uncopying.contains(file.path)) wanted.push_back(&file);
  }
  std::sort(wanted.begin(), wanted.end(),
            [](const TreeFile* a, const TreeFile* b) { return a->seq < b->seq; });
  for (const TreeFile* file : wanted) {
    if (room <= 0) break;
    if (isCompletionMarker(file->path) &&
        (firstFile < file->seq || incompleteInScope(o, file->path, notOnPeers)))
      continue;
    const DrainStep step{DrainStep::Kind::kCopy, file->path, file->seq};
    if (isUnderway(o, step)) continue;
    plan.start.push_back(step);
    --room;
  }
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const DrainStep& step) {
  static constexpr std::array<const char*, 4> kNames = {"copy", "upload", "remove", "uncopy"};
  return out << kNames[static_cast<size_t>(step.kind)] << " " << step.path << "@" << step.seq;
}

bool isCompletionMarker(std::string_view path) {
  static constexpr std::array<std::string_view, 5> kMarkers = {".metadata", ".snapshot_metadata",
                                                               "latest_checkpointed_iteration.txt",
                                                               "latest", "checkpoint"};
  const std::string_view name = baseName(path);
  return std::find(kMarkers.begin(), kMarkers.end(), name) != kMarkers.end();
}

DrainPlan planDrain(const DrainObservation& o) {
  std::map<std::string, const TreeFile*> byPath;
  for (const TreeFile& file : o.closed) byPath[file.path] = &file;
  DrainPlan plan;
  abandonStale(o, byPath, plan);
  const Pending pending = pendingOf(o);
  for (const TreeFile* file : pending.files)
    if (!o.held.contains(file->path)) {
      plan.oldestPending = *file;
      break;
    }
  planOrigin(o, byPath, pending, plan);
  planCopies(o, plan);
  return plan;
}

std::vector<TreeFile> evictable(const DrainObservation& o) {
  std::vector<TreeFile> safe;
  for (const TreeFile& file : o.closed)
    if (!o.writing.contains(file.path) && !o.held.contains(file.path) && atOrigin(o, file))
      safe.push_back(file);
  std::sort(safe.begin(), safe.end(),
            [](const TreeFile& a, const TreeFile& b) { return a.seq < b.seq; });
  return safe;
}

std::vector<CheckpointCopies> checkpointsOf(const DrainObservation& o) {
  std::map<std::string, CheckpointCopies, std::less<>> byName;
  for (const TreeFile& file : o.closed) {
    const std::string_view name = topLevel(file.path);
    if (name == file.path && isCompletionMarker(name)) continue;  // `latest` names one
    auto [it, added] = byName.try_emplace(std::string(name));
    CheckpointCopies& c = it->second;
    if (added) c = {.name = std::string(name), .onPeer = true, .atOrigin = true};
    c.files += 1;
    c.bytes += file.size;
    c.newestSeq = std::max(c.newestSeq, file.seq);
    c.onPeer = c.onPeer && onPeers(o, file, 1);
    c.atOrigin = c.atOrigin && atOrigin(o, file);
  }
  std::vector<CheckpointCopies> out;
  for (auto& [name, c] : byName) out.push_back(std::move(c));
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.newestSeq > b.newestSeq; });
  return out;
}

}  // namespace granary::checkpoint
