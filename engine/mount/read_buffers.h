// The memory reads through a mount land in before the kernel takes them. Reads of data on this
// node's disks take a pooled buffer, which also bounds how many of them are in flight: more did
// not read faster, only each slower (a virtual disk measured best at about 8), and the pool
// admits them in the order asked, so a reader waits for the earliest of its requests. Pooled
// buffers are aligned to and backed by huge pages where the kernel grants them, so that a
// direct read is one large segment rather than one per 4 KiB page (direct reads into ordinary
// pages ran at half the speed). Thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace granary::cache {

class ReadBuffer {
 public:
  // A pooled buffer with room for `size` bytes rounded up to 4 KiB (or more), once one is free;
  // a buffer of its own when `size` is larger than a pooled one. Empty when memory is short.
  static ReadBuffer pooled(size_t size);
  // A buffer of its own, outside the pool's turns: for a read that waits on the network and
  // should hold no turn from reads of the disk. Empty when memory is short.
  static ReadBuffer own(size_t size);

  ReadBuffer(ReadBuffer&&) = default;
  ReadBuffer& operator=(ReadBuffer&&) = default;
  ~ReadBuffer() = default;

  explicit operator bool() const { return memory_ != nullptr; }
  // Gives the memory back now (a pooled buffer's turn to the next read); empty after.
  void release() {
    memory_.reset();
    size_ = 0;
  }
  std::span<char> span() const { return {memory_.get(), size_}; }  // all its room, 4 KiB aligned

 private:
  using Memory = std::unique_ptr<char, void (*)(char*)>;
  ReadBuffer(Memory memory, size_t size) : memory_(std::move(memory)), size_(size) {}
  Memory memory_;
  size_t size_;
};

}  // namespace granary::cache
