// Which mount holds a directory, and whether mounts made there propagate.
#include "cache-node/csi/mount_propagation.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

namespace granary::cache {
namespace {

// A host whose root is private (a minimal host without systemd), with a shared kubelet
// directory, a slave mount and a mount point with a space in its name.
constexpr std::string_view kMountinfo =
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
    "40 27 0:50 / /var/lib/kubelet rw,relatime shared:12 - ext4 /dev/vdb rw\n"
    "41 40 0:51 / /var/lib/kubelet/pods/a\\040b rw master:12 - tmpfs tmpfs rw\n"
    "42 27 0:52 / /var/lib/granary rw,relatime - xfs /dev/nvme0n1 rw\n"
    "43 27 0:53 / /var/lib/granary rw,relatime shared:20 master:3 - xfs /dev/nvme0n1 rw\n";

TEST(MountPropagation, FindsTheInnermostLatestMountAndItsPropagation) {
  const auto expect = [](const char* path, const char* point, bool shared) {
    auto mount = mountHolding(path, kMountinfo);
    ASSERT_TRUE(mount.isOk()) << path << ": " << mount.status();
    EXPECT_EQ(mount->point, point) << path;
    EXPECT_EQ(mount->shared, shared) << path;
  };
  expect("/", "/", false);
  expect("/var/lib/kubelet-other", "/", false);  // a sibling whose name starts alike
  expect("/var/lib/kubelet", "/var/lib/kubelet", true);
  expect("/var/lib/kubelet/pods/x/volumes", "/var/lib/kubelet", true);
  expect("/var/lib/kubelet/pods/a b/c", "/var/lib/kubelet/pods/a b", false);  // a slave only
  expect("/var/lib/granary/mounts", "/var/lib/granary", true);  // the later mount is on top
  expect("/var/lib/kubelet/../granary", "/var/lib/granary", true);
}

TEST(MountPropagation, TextWithoutMountsIsAnError) {
  EXPECT_EQ(mountHolding("/x", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(mountHolding("/x", "garbage\n").status().code(), StatusCode::kInvalidArgument);
}

// This process's own mounts: a tmpfs made private, then shared.
TEST(MountPropagation, ChecksThisProcesssMountsAndNamesTheFix) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  const auto dir = std::filesystem::temp_directory_path() /
                   ("granary-propagation-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m"), 0);
  std::filesystem::create_directories(dir / "state");
  ASSERT_EQ(::mount(nullptr, dir.c_str(), nullptr, MS_PRIVATE, nullptr), 0);
  const Status private_ = checkSharedMounts({(dir / "state").string()});
  EXPECT_EQ(private_.code(), StatusCode::kFailedPrecondition);
  for (const std::string& needed :
       std::vector<std::string>{(dir / "state").string() + " is on " + dir.string(), "private",
                                "mount --make-rshared", "docs/install.md"})
    EXPECT_NE(private_.message().find(needed), std::string::npos) << needed << " in " << private_;
  ASSERT_EQ(::mount(nullptr, dir.c_str(), nullptr, MS_SHARED, nullptr), 0);
  EXPECT_TRUE(checkSharedMounts({(dir / "state").string()}).isOk());
  EXPECT_TRUE(checkSharedMounts({}).isOk());
  ::umount2(dir.c_str(), MNT_DETACH);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace granary::cache
