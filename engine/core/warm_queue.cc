#include "engine/core/warm_queue.h"

namespace granary::cache {

struct WarmChunk::File {
  WarmFile file;
  int64_t chunks = 0;
  int64_t next = 0;       // the next chunk to hand out
  int64_t remaining = 0;  // chunks handed out or not, not finished
  WarmClass from = WarmClass::kScan;
  bool failed = false;
  bool fetched = false;
};

const WarmFile& WarmChunk::warmFile() const { return file->file; }

namespace {

// Whether `file` has chunks not handed out yet.
bool pending(const std::shared_ptr<WarmChunk::File>& file) {
  return file && file->next < file->chunks;
}

}  // namespace

WarmQueue::WarmQueue(int64_t chunkSize) : chunkSize_(chunkSize) {}

void WarmQueue::startPass(std::vector<WarmFile> hinted) {
  demanded_.clear();
  hinted_.clear();
  scanned_.clear();
  cursor_.clear();
  scanDone_ = false;
  seen_.clear();
  demandFile_.reset();
  current_.reset();
  for (auto& counter : handedOut_) counter = 0;
  for (auto& file : hinted) {
    if (seen_.insert(file.path).second) hinted_.push_back(std::move(file));
  }
}

void WarmQueue::demand(WarmFile file) {
  if (seen_.contains(file.path)) {
    // A hinted file not yet handed out moves ahead; one handed out already is under way.
    for (auto it = hinted_.begin(); it != hinted_.end(); ++it) {
      if (it->path != file.path) continue;
      hinted_.erase(it);
      demanded_.push_back(std::move(file));
      return;
    }
    return;
  }
  seen_.insert(file.path);
  demanded_.push_back(std::move(file));
}

bool WarmQueue::needsScan() const {
  return !scanDone_ && demanded_.empty() && hinted_.empty() && scanned_.empty() &&
         !pending(demandFile_) && !pending(current_);
}

void WarmQueue::addScan(std::vector<WarmFile> batch, bool last) {
  scanDone_ = scanDone_ || last;
  for (auto& file : batch) scanned_.push_back(std::move(file));
}

std::shared_ptr<WarmChunk::File> WarmQueue::start(WarmFile file, WarmClass from) {
  auto state = std::make_shared<WarmChunk::File>();
  state->chunks = state->remaining = (file.size + chunkSize_ - 1) / chunkSize_;
  state->file = std::move(file);
  state->from = from;
  if (state->chunks == 0) return nullptr;  // nothing to fetch
  ++handedOut_[static_cast<int>(from)];
  return state;
}

std::optional<WarmChunk> WarmQueue::take(std::shared_ptr<WarmChunk::File>& current) {
  if (!pending(current)) return std::nullopt;
  return WarmChunk{current, current->next++, current->from};
}

std::optional<WarmChunk> WarmQueue::next() {
  while (true) {
    if (auto chunk = take(demandFile_)) return chunk;
    if (!demanded_.empty()) {
      demandFile_ = start(std::move(demanded_.front()), WarmClass::kDemand);
      demanded_.pop_front();
      continue;
    }
    if (auto chunk = take(current_)) return chunk;
    if (!hinted_.empty()) {
      current_ = start(std::move(hinted_.front()), WarmClass::kHint);
      hinted_.pop_front();
      continue;
    }
    if (!scanned_.empty()) {
      WarmFile file = std::move(scanned_.front());
      scanned_.pop_front();
      if (!seen_.insert(file.path).second) continue;  // the hint or a reader had it
      current_ = start(std::move(file), WarmClass::kScan);
      continue;
    }
    return std::nullopt;  // done, or the scan's next batch is needed
  }
}

bool WarmQueue::finish(const WarmChunk& chunk, bool ok, bool fetched) {
  WarmChunk::File& file = *chunk.file;
  --file.remaining;
  file.failed = file.failed || !ok;
  file.fetched = file.fetched || fetched;
  return file.remaining == 0 && !file.failed && file.fetched;
}

bool WarmQueue::exhausted() const {
  return scanDone_ && demanded_.empty() && hinted_.empty() && scanned_.empty() &&
         !pending(demandFile_) && !pending(current_);
}

std::vector<std::string> parseAccessOrder(std::string_view text) {
  std::vector<std::string> paths;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) continue;
    line = line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
    if (line.starts_with('#')) continue;
    while (line.starts_with("./")) line.remove_prefix(2);
    while (line.starts_with('/')) line.remove_prefix(1);
    if (!line.empty()) paths.emplace_back(line);
  }
  return paths;
}

}  // namespace granary::cache
