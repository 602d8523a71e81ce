#include "engine/checkpoint/tree_journal.h"

#include <algorithm>

namespace granary::checkpoint {
namespace {

bool isBelow(const std::string& path, const std::string& directory) {
  return path.size() > directory.size() && path.compare(0, directory.size(), directory) == 0 &&
         path[directory.size()] == '/';
}

}  // namespace

void TreeJournal::recordAtOrigin(const std::vector<OriginEntry>& entries) {
  for (const OriginEntry& e : entries) origin_[e.path] = AtOrigin{0, e.identity};
  scanning_ = true;
}

void TreeJournal::scanDone() {
  scanning_ = false;
  for (const auto& [path, held] : origin_)
    if (held.seq == 0 && !files_.contains(path)) removals_.push_back({path, ++seq_});
}

void TreeJournal::writing(const std::string& path) { writing_.insert(path); }

bool TreeJournal::closed(const std::string& path, const FileIdentity& identity, WallTime at) {
  writing_.erase(path);
  links_.erase(path);  // a link it replaced
  const auto current = files_.find(path);
  if (current != files_.end() && current->second.identity == identity) return false;
  const uint64_t seq = ++seq_;
  files_[path] = Version{TreeFile{path, seq, identity.size, at}, identity};
  // A removal of this path not carried out yet stays: the planner settles it, since the tree
  // holds the path again.
  const auto copy = copies_.find(path);
  const bool copied = copy != copies_.end() && copy->second.here == identity;
  const auto held = origin_.find(path);
  if (held == origin_.end() || !(held->second.identity == identity)) return !copied;
  if (held->second.seq == 0) held->second.seq = seq;  // uploaded (or restored) before a restart
  return false;
}

void TreeJournal::removed(const std::string& path, bool directory) {
  const auto gone = [&](const std::string& p) {
    return p == path || (directory && isBelow(p, path));
  };
  for (auto it = files_.begin(); it != files_.end();) {
    if (gone(it->first)) {
      removals_.push_back({it->first, ++seq_});
      if (peers_.erase(it->first) > 0) uncopies_.push_back(removals_.back());
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  // A file seen being written may be gone before its close was seen (renamed away at once).
  std::erase_if(writing_, gone);
  std::erase_if(copies_, [&](const auto& entry) { return gone(entry.first); });
  std::erase_if(links_, gone);
}

void TreeJournal::linked(const std::string& path) {
  removed(path, false);  // a file it replaced
  links_.insert(path);
}

void TreeJournal::evicted(const std::string& path) {
  files_.erase(path);
  origin_.erase(path);
  peers_.erase(path);
  copies_.erase(path);
}

void TreeJournal::started(const DrainStep& step) { underway_.push_back(step); }

void TreeJournal::finished(const DrainStep& step, int peers) {
  ended(step);
  switch (step.kind) {
    case DrainStep::Kind::kUpload: {
      // The origin holds this version even when the tree has moved on since (the path removed
      // or written again): the removal, or the newer version's upload, follows it there. The
      // identity of a version the tree no longer holds is unknown: one that matches no file.
      const auto file = files_.find(step.path);
      const bool current = file != files_.end() && file->second.file.seq == step.seq;
      origin_[step.path] = AtOrigin{step.seq, current ? file->second.identity : FileIdentity{}};
      return;
    }
    case DrainStep::Kind::kRemove:
      std::erase(removals_, TreeRemoval{step.path, step.seq});
      // The origin no longer holds the path, unless a newer version reached it since. (A marker
      // taken down before the files it speaks for is removed at the seq of its version there.)
      if (const auto held = origin_.find(step.path);
          held != origin_.end() && held->second.seq <= step.seq)
        origin_.erase(held);
      return;
    case DrainStep::Kind::kCopy:
      // A copy that ended after its path left the tree is removed from the peers in turn.
      if (!files_.contains(step.path) && !writing_.contains(step.path)) {
        uncopies_.push_back({step.path, step.seq});
        return;
      }
      peers_[step.path] = {step.seq, peers};
      return;
    case DrainStep::Kind::kUncopy:
      std::erase(uncopies_, TreeRemoval{step.path, step.seq});
      return;
  }
}

void TreeJournal::ended(const DrainStep& step) {
  const auto it = std::find(underway_.begin(), underway_.end(), step);
  if (it != underway_.end()) underway_.erase(it);
}

void TreeJournal::settle(const std::vector<TreeRemoval>& removals) {
  for (const TreeRemoval& r : removals) std::erase(removals_, r);
}

void TreeJournal::copyArriving(const std::string& path, const FileIdentity& identity,
                               const std::string& writer, const FileIdentity& source,
                               bool atOrigin) {
  copies_[path] = Copy{writer, identity, source, !atOrigin};
  if (atOrigin) origin_[path] = AtOrigin{0, identity};  // closed() finds it there
}

void TreeJournal::copyAtOrigin(const std::string& writer, const std::string& path,
                               const FileIdentity& source) {
  const auto copy = copies_.find(path);
  if (copy == copies_.end() || copy->second.writer != writer || copy->second.source != source)
    return;
  copy->second.held = false;
  const auto file = files_.find(path);
  const bool closed = file != files_.end() && file->second.identity == copy->second.here;
  origin_[path] = AtOrigin{closed ? file->second.file.seq : 0, copy->second.here};
}

std::optional<FileIdentity> TreeJournal::copyOf(const std::string& writer, const std::string& path,
                                                bool heldOnly) const {
  const auto copy = copies_.find(path);
  if (copy == copies_.end() || copy->second.writer != writer || (heldOnly && !copy->second.held))
    return std::nullopt;
  return copy->second.here;
}

std::vector<std::string> TreeJournal::heldCopies(const std::string& writer) const {
  std::vector<std::string> paths;
  for (const auto& [path, copy] : copies_)
    if (copy.writer == writer && copy.held) paths.push_back(path);
  return paths;
}

void TreeJournal::forgetCopy(const std::string& writer, const std::string& path) {
  const auto copy = copies_.find(path);
  if (copy == copies_.end() || copy->second.writer != writer) return;
  copy->second.held = true;
  if (const auto held = origin_.find(path);
      held != origin_.end() && held->second.identity == copy->second.here)
    origin_.erase(held);
}

void TreeJournal::release(const std::string& writer) {
  for (auto& [path, copy] : copies_)
    if (copy.writer == writer) copy.held = false;
}

std::vector<TreeJournal::Listed> TreeJournal::listing() const {
  std::vector<Listed> out;
  for (const auto& [path, version] : files_)
    if (!writing_.contains(path))
      out.push_back({path, version.identity, isAtOrigin(path, version.file.seq)});
  return out;
}

bool TreeJournal::isHeld(const std::string& path, const Version& version) const {
  const auto copy = copies_.find(path);
  return copy != copies_.end() && copy->second.held && copy->second.here == version.identity;
}

DrainObservation TreeJournal::observe(int copies, int maxUploads, int maxCopies) const {
  DrainObservation o;
  o.closed.reserve(files_.size());
  for (const auto& [path, version] : files_) {
    o.closed.push_back(version.file);
    if (isHeld(path, version)) o.held.insert(path);
  }
  o.writing = writing_;
  o.removals = removals_;
  o.uncopies = uncopies_;
  // A version from before a restart counts as seq 0: at the origin, so that its removal is
  // carried out, and never the tree's version.
  for (const auto& [path, held] : origin_) o.origin[path] = held.seq;
  o.peers = peers_;
  o.underway = underway_;
  o.copies = copies;
  o.maxUploads = maxUploads;
  o.maxCopies = maxCopies;
  return o;
}

std::optional<FileIdentity> TreeJournal::identity(const std::string& path, uint64_t seq) const {
  const auto it = files_.find(path);
  if (it == files_.end() || it->second.file.seq != seq) return std::nullopt;
  return it->second.identity;
}

bool TreeJournal::isAtOrigin(const std::string& path, uint64_t seq) const {
  const auto held = origin_.find(path);
  return held != origin_.end() && held->second.seq == seq;
}

std::vector<OriginEntry> TreeJournal::record() const {
  std::vector<OriginEntry> entries;
  entries.reserve(origin_.size());
  for (const auto& [path, held] : origin_) entries.push_back({path, held.identity});
  return entries;
}

bool TreeJournal::drained() const {
  if (!writing_.empty() || !removals_.empty() || !uncopies_.empty()) return false;
  return std::all_of(files_.begin(), files_.end(), [&](const auto& entry) {
    const auto held = origin_.find(entry.first);
    return held != origin_.end() && held->second.seq == entry.second.file.seq;
  });
}

}  // namespace granary::checkpoint
