// The trainer's reader threads and the bounded queue between them and the training loop.
#include "examples/trainer/loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace granary::trainer {
namespace {

constexpr size_t kReadPiece = size_t{1} << 20;  // bytes asked of each read(2)

Status readError(const std::filesystem::path& path, const char* what, int error) {
  return unavailable("cannot " + std::string(what) + " " + path.string() + ": " +
                     std::strerror(error));
}

// Appends the whole of `path` to `bytes`, reading it in pieces of at most kReadPiece bytes.
Status appendFile(const std::filesystem::path& path, std::vector<std::byte>& bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return readError(path, "open", errno);
  struct stat info {};
  const size_t expected = ::fstat(fd, &info) == 0 ? static_cast<size_t>(info.st_size) : 0;
  size_t filled = bytes.size();
  // Room for the size fstat gave plus one byte, so that the read finding the end has room.
  bytes.resize(filled + expected + 1);
  while (true) {
    if (filled == bytes.size()) bytes.resize(filled + kReadPiece);  // it grew since fstat
    const size_t piece = std::min(kReadPiece, bytes.size() - filled);
    const ssize_t got = ::read(fd, bytes.data() + filled, piece);
    if (got > 0) {
      filled += static_cast<size_t>(got);
    } else if (got == 0) {
      break;
    } else if (errno != EINTR) {
      const int error = errno;
      ::close(fd);
      bytes.resize(filled);
      return readError(path, "read", error);
    }
  }
  ::close(fd);
  bytes.resize(filled);
  return Status::ok();
}

}  // namespace

EpochLoader::EpochLoader(std::vector<std::filesystem::path> shard, const LoaderOptions& options)
    : shard_(std::move(shard)),
      batchSize_(static_cast<size_t>(options.batchSize)),
      batchCount_((shard_.size() + batchSize_ - 1) / batchSize_),
      capacity_(static_cast<size_t>(options.readers) * static_cast<size_t>(options.prefetch)) {
  readers_.reserve(static_cast<size_t>(options.readers));
  for (int i = 0; i < options.readers; ++i) {
    readers_.emplace_back([this](const std::stop_token& stop) { readBatches(stop); });
  }
}

Result<std::optional<Batch>> EpochLoader::next() {
  std::unique_lock lock(mutex_);
  if (handedOut_ == batchCount_) return std::optional<Batch>();
  changed_.wait(lock, [this] { return !ready_.empty() || !failure_.isOk(); });
  if (!failure_.isOk()) return failure_;
  Batch batch = std::move(ready_.front());
  ready_.pop_front();
  ++handedOut_;
  lock.unlock();
  changed_.notify_all();  // room for a waiting reader
  return std::optional<Batch>(std::move(batch));
}

void EpochLoader::readBatches(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    const size_t index = nextToRead_.fetch_add(1);
    if (index >= batchCount_) return;
    Batch batch;
    if (Status status = readBatch(index, stop, batch); !status.isOk()) {
      fail(std::move(status));
      return;
    }
    enqueue(std::move(batch), stop);
  }
}

Status EpochLoader::readBatch(size_t index, const std::stop_token& stop, Batch& batch) const {
  const size_t first = index * batchSize_;
  const size_t end = std::min(first + batchSize_, shard_.size());
  for (size_t i = first; i < end && !stop.stop_requested(); ++i) {
    GRANARY_RETURN_IF_ERROR(appendFile(shard_[i], batch.bytes));
    ++batch.samples;
  }
  return Status::ok();
}

void EpochLoader::enqueue(Batch batch, const std::stop_token& stop) {
  std::unique_lock lock(mutex_);
  if (!changed_.wait(lock, stop, [this] { return ready_.size() < capacity_; })) return;
  ready_.push_back(std::move(batch));
  lock.unlock();
  changed_.notify_all();
}

void EpochLoader::fail(Status status) {
  {
    std::lock_guard lock(mutex_);
    if (failure_.isOk()) failure_ = std::move(status);
  }
  changed_.notify_all();
}

}  // namespace granary::trainer
