// A process placed in a cgroup named as the kubelet names a pod's, `<hierarchy>/kubepods/
// pod<uid>`, so that whatever reads /proc/<pid>/cgroup (the cache node's reader accounting)
// takes it for a container of that pod. Needs a cgroup hierarchy this process may write (root).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/result.h"

namespace granary::testing {

class PodCgroup {
 public:
  // Creates the pod's cgroup on the first hierarchy of /proc/self/mounts (cgroup v2 first, then
  // v1) where it can be made and `pid` written into its cgroup.procs, and moves `pid` there.
  // Unavailable, naming each hierarchy tried and why it failed, when none can.
  static Result<std::unique_ptr<PodCgroup>> enter(const std::string& podUid, pid_t pid);
  // Removes the cgroup (and kubepods/ when this object made it and it is empty), killing what
  // still runs in it.
  ~PodCgroup();

  const std::filesystem::path& path() const { return path_; }

 private:
  PodCgroup() = default;
  std::filesystem::path path_;
  bool madeKubepods_ = false;
};

}  // namespace granary::testing
