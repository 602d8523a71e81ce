// A FUSE mount that answers nothing, for as long as it lives: its FUSE_INIT stays unanswered, so
// nothing may touch its mount point; it is detached and its connection closed at the end. For
// probing at start what the kernel offers FUSE mounts.
#pragma once

#include <filesystem>

#include "common/owned_fd.h"
#include "common/result.h"

namespace granary::cache {

class ScratchFuseMount {
 public:
  explicit ScratchFuseMount(std::filesystem::path point) : point_(std::move(point)) {}
  ~ScratchFuseMount();
  ScratchFuseMount(const ScratchFuseMount&) = delete;
  ScratchFuseMount& operator=(const ScratchFuseMount&) = delete;

  // Mounts it through `device` (/dev/fuse). FailedPrecondition, naming what is missing, when it
  // cannot.
  Status mount(const std::filesystem::path& device);
  int fd() const { return fd_.get(); }

 private:
  std::filesystem::path point_;
  OwnedFd fd_;
  bool mounted_ = false;
};

}  // namespace granary::cache
