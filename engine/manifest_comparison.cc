#include "engine/manifest_comparison.h"

#include <vector>

namespace granary::cache {
namespace {

constexpr size_t kBatch = 4096;

// The files of one generation, read a batch at a time.
class FileCursor {
 public:
  FileCursor(const ManifestStore& manifests, const std::string& generation)
      : manifests_(manifests), generation_(generation) {}

  // The file the walk stands on; null at the end.
  Result<const ListedFile*> current() {
    if (at_ == batch_.size() && !ended_) {
      GRANARY_ASSIGN_OR_RETURN(batch_, manifests_.files(generation_, cursor_, kBatch));
      at_ = 0;
      ended_ = batch_.empty();
    }
    if (ended_) return static_cast<const ListedFile*>(nullptr);
    const ManifestEntry& entry = batch_[at_];
    file_ = {.path = entry.path, .size = entry.size, .version = entry.etag};
    return &file_;
  }
  void advance() { ++at_; }

 private:
  const ManifestStore& manifests_;
  const std::string& generation_;
  std::string cursor_;
  std::vector<ManifestEntry> batch_;
  size_t at_ = 0;
  bool ended_ = false;
  ListedFile file_;
};

}  // namespace

Result<ManifestChanges> compareVersions(const ManifestStore& manifests, const std::string& before,
                                        const std::string& now, std::stop_token stop) {
  FileCursor old(manifests, before), fresh(manifests, now);
  ManifestChanges changes;
  for (;;) {
    if (stop.stop_requested()) return cancelled("stopping");
    GRANARY_ASSIGN_OR_RETURN(const ListedFile* a, old.current());
    GRANARY_ASSIGN_OR_RETURN(const ListedFile* b, fresh.current());
    if (a == nullptr && b == nullptr) return changes;
    const auto order = a == nullptr   ? std::strong_ordering::greater
                       : b == nullptr ? std::strong_ordering::less
                                      : manifestOrder(a->path, b->path);
    if (order < 0) {
      countChange(changes, a, nullptr);
      old.advance();
    } else if (order > 0) {
      countChange(changes, nullptr, b);
      fresh.advance();
    } else {
      countChange(changes, a, b);
      old.advance();
      fresh.advance();
    }
  }
}

}  // namespace granary::cache
