#include "engine/mount/read_buffers.h"

#include <sys/mman.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "common/thread_annotations.h"

namespace granary::cache {
namespace {

constexpr size_t kAlignment = 4096;
constexpr size_t kPooledSize = 2 << 20;  // a FUSE read (<= 1 MiB) fits, as does one huge page
constexpr size_t kPooledCount = 8;

size_t roundUp(size_t size) { return (size + kAlignment - 1) / kAlignment * kAlignment; }

void freeOwn(char* memory) { std::free(memory); }

class Pool {
 public:
  static Pool& instance() {
    static Pool pool;
    return pool;
  }

  // A buffer of kPooledSize once one is free, in the order asked; null when memory is short.
  char* take() {
    MutexLock lock(mutex_);
    if (taken_ < kPooledCount && waiting_.empty()) {
      ++taken_;
    } else {
      Waiter waiter;  // admitted by give(), which hands over its place
      waiting_.push_back(&waiter);
      waiter.turn.wait(lock, [&] { return waiter.admitted; });  // admitted: under mutex_
    }
    if (!free_.empty()) {
      char* buffer = free_.back();
      free_.pop_back();
      return buffer;
    }
    lock.unlock();
    auto* buffer = static_cast<char*>(std::aligned_alloc(kPooledSize, kPooledSize));
    if (buffer == nullptr) {
      give(nullptr);
      return nullptr;
    }
    ::madvise(buffer, kPooledSize, MADV_HUGEPAGE);
    std::memset(buffer, 0, kPooledSize);  // fault it in now, as one huge page
    return buffer;
  }

  // Returns a buffer (null: one that could not be allocated) and admits the next waiter.
  static void give(char* buffer) {
    Pool& self = instance();
    MutexLock lock(self.mutex_);
    if (buffer != nullptr) self.free_.push_back(buffer);
    if (self.waiting_.empty()) {
      --self.taken_;
      return;
    }
    Waiter* next = self.waiting_.front();
    self.waiting_.pop_front();
    next->admitted = true;
    next->turn.notify_one();
  }

 private:
  struct Waiter {
    std::condition_variable_any turn;  // waits on Pool::mutex_
    bool admitted = false;             // under Pool::mutex_
  };
  ~Pool() {
    for (char* buffer : free_) std::free(buffer);
  }
  Mutex mutex_;
  std::vector<char*> free_ GRANARY_GUARDED_BY(mutex_);
  std::deque<Waiter*> waiting_ GRANARY_GUARDED_BY(mutex_);
  size_t taken_ GRANARY_GUARDED_BY(mutex_) = 0;  // buffers out, or allocating
};

}  // namespace

ReadBuffer ReadBuffer::pooled(size_t size) {
  if (roundUp(size) > kPooledSize) return own(size);
  char* buffer = Pool::instance().take();
  return ReadBuffer(Memory(buffer, &Pool::give), buffer != nullptr ? kPooledSize : 0);
}

ReadBuffer ReadBuffer::own(size_t size) {
  const size_t room = roundUp(std::max<size_t>(size, 1));
  auto* memory = static_cast<char*>(std::aligned_alloc(kAlignment, room));
  return ReadBuffer(Memory(memory, &freeOwn), memory != nullptr ? room : 0);
}

}  // namespace granary::cache
