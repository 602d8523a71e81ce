#include "engine/mount/scratch_mount.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace granary::cache {

ScratchFuseMount::~ScratchFuseMount() {
  if (mounted_) ::umount2(point_.c_str(), MNT_DETACH);
  fd_ = OwnedFd();
  std::error_code ignored;
  std::filesystem::remove(point_, ignored);
}

Status ScratchFuseMount::mount(const std::filesystem::path& device) {
  std::error_code error;
  ::umount2(point_.c_str(), MNT_DETACH);  // left by a process that died here
  std::filesystem::create_directories(point_, error);
  if (error) return failedPrecondition("cannot create " + point_.string() + ": " + error.message());
  fd_ = OwnedFd(::open(device.c_str(), O_RDWR | O_CLOEXEC));
  if (fd_.get() < 0)
    return failedPrecondition("cannot open " + device.string() + ": " + std::strerror(errno));
  const std::string options = "fd=" + std::to_string(fd_.get()) +
                              ",rootmode=40000,user_id=" + std::to_string(::getuid()) +
                              ",group_id=" + std::to_string(::getgid());
  if (::mount("granary-probe", point_.c_str(), "fuse.granary-probe",
              MS_NOSUID | MS_NODEV | MS_RDONLY, options.c_str()) != 0) {
    return failedPrecondition("cannot mount a FUSE file system at " + point_.string() + ": " +
                              std::strerror(errno) + " (dataset mounts need CAP_SYS_ADMIN)");
  }
  mounted_ = true;
  return Status::ok();
}

}  // namespace granary::cache
