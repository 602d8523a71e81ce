// The order in which one dataset generation's warm pass hands out its chunks. Pure: no I/O, no
// locks, no clock; its owner serializes the calls (DatasetCache, under its mutex).
//
// Three classes of files, each ahead of the next:
//   kDemand: files a reader is waiting on (it missed a chunk): the rest of the file goes next;
//   kHint:   the access-order hint, in its order;
//   kScan:   the manifest in path order, fed by the owner in batches (needsScan(), cursor(),
//            addScan()) as it reads them.
// A file is handed out once per pass, by whichever class names it first; its chunks go one after
// another, and a demanded file's chunks go before those of the file in progress. The owner gives
// the queue only the files this node owns and wants warmed.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace granary::cache {

enum class WarmClass { kDemand, kHint, kScan };

// A file as the warmer needs it: its manifest path, size and listed version.
struct WarmFile {
  std::string path;
  int64_t size = 0;
  std::string version;
};

// One chunk to warm. `file` is shared by the file's chunks; finish() each one handed out.
struct WarmChunk {
  struct File;
  std::shared_ptr<File> file;
  int64_t index = 0;
  WarmClass from = WarmClass::kScan;

  const WarmFile& warmFile() const;
};

class WarmQueue {
 public:
  // `chunkSize` > 0: the dataset's chunk size.
  explicit WarmQueue(int64_t chunkSize);

  // Forgets the previous pass and starts one: `hinted` files first, in order (duplicates after
  // the first dropped), then the scan from its start.
  void startPass(std::vector<WarmFile> hinted);
  // A reader waits on `file`: its chunks go next. Ignored when it was handed out in this pass.
  void demand(WarmFile file);

  // next() needs the next batch of the scan first: the owner reads the manifest from cursor()
  // (which it may advance) and calls addScan().
  bool needsScan() const;
  std::string& cursor() { return cursor_; }
  // The next files of the scan, in order (the owner leaves out those it does not warm); `last`
  // when the manifest has no more.
  void addScan(std::vector<WarmFile> batch, bool last);

  // The next chunk, or nullopt when nothing is left to hand out (or needsScan()).
  std::optional<WarmChunk> next();
  // A chunk handed out is done: `ok` (kept or already there) and whether it was `fetched` (from a
  // peer or the origin, not found on disk). True when it was the file's last chunk, all of them
  // ok and some fetched: a file warmed by this pass.
  bool finish(const WarmChunk& chunk, bool ok, bool fetched);

  // Files handed out in this pass, by class; and whether the pass handed out everything.
  int64_t handedOut(WarmClass from) const { return handedOut_[static_cast<int>(from)]; }
  bool exhausted() const;

 private:
  std::shared_ptr<WarmChunk::File> start(WarmFile file, WarmClass from);
  std::optional<WarmChunk> take(std::shared_ptr<WarmChunk::File>& current);

  const int64_t chunkSize_;
  std::deque<WarmFile> demanded_;
  std::deque<WarmFile> hinted_;
  std::deque<WarmFile> scanned_;
  std::string cursor_;
  bool scanDone_ = false;
  std::set<std::string> seen_;                   // paths handed out (or queued by the hint)
  std::shared_ptr<WarmChunk::File> demandFile_;  // the demanded file whose chunks go out
  std::shared_ptr<WarmChunk::File> current_;     // the hinted or scanned one
  int64_t handedOut_[3] = {0, 0, 0};
};

// The paths of an access-order file: one per line, relative to the dataset root (a leading "/" or
// "./" is dropped), surrounding blanks and a trailing CR trimmed; blank lines and lines starting
// with "#" skipped.
std::vector<std::string> parseAccessOrder(std::string_view text);

}  // namespace granary::cache
