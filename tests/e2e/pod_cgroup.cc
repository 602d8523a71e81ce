#include "tests/e2e/pod_cgroup.h"

#include <signal.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <vector>

#include "common/status.h"
#include "tests/support/eventually.h"

namespace granary::testing {

Result<std::unique_ptr<PodCgroup>> PodCgroup::enter(const std::string& podUid, pid_t pid) {
  std::vector<std::filesystem::path> v2, v1;
  std::ifstream mounts("/proc/self/mounts");
  for (std::string device, point, type, rest; mounts >> device >> point >> type;) {
    std::getline(mounts, rest);
    if (type == "cgroup2") v2.emplace_back(point);
    if (type == "cgroup") v1.emplace_back(point);
  }
  v2.insert(v2.end(), v1.begin(), v1.end());
  std::string tried;
  for (const auto& hierarchy : v2) {
    std::unique_ptr<PodCgroup> cgroup(new PodCgroup());
    const auto kubepods = hierarchy / "kubepods";
    std::error_code error;
    cgroup->madeKubepods_ = std::filesystem::create_directory(kubepods, error);
    if (!error) std::filesystem::create_directory(kubepods / ("pod" + podUid), error);
    if (error) {
      tried += "\n  " + kubepods.string() + ": " + error.message();
      if (cgroup->madeKubepods_) std::filesystem::remove(kubepods, error);
      continue;
    }
    cgroup->path_ = kubepods / ("pod" + podUid);
    std::ofstream procs(cgroup->path_ / "cgroup.procs");
    if (procs << pid << std::endl) return cgroup;
    tried += "\n  " + (cgroup->path_ / "cgroup.procs").string() + ": " + std::strerror(errno);
    // cgroup's destructor removes what was made
  }
  return unavailable("no cgroup hierarchy takes a process here (tried:" +
                     (tried.empty() ? std::string(" none mounted)") : tried + ")"));
}

PodCgroup::~PodCgroup() {
  if (path_.empty()) return;
  // A process killed a moment ago may still be on its way out (a read blocked in FUSE returns
  // first): kill what is left and retry until the cgroup is empty, for up to 5 s.
  std::error_code error;
  eventually(
      [&] {
        std::ifstream procs(path_ / "cgroup.procs");
        for (pid_t pid; procs >> pid;) ::kill(pid, SIGKILL);
        return std::filesystem::remove(path_, error) || !std::filesystem::exists(path_);
      },
      std::chrono::seconds(5));
  if (madeKubepods_) std::filesystem::remove(path_.parent_path(), error);
}

}  // namespace granary::testing
