// Paths that must stay beneath a directory. file:// origins read only under the roots the node
// allows: the check when a source is made resolves symlinks and ".." before it compares,
// and every later open resolves beneath the root again, so that a component swapped for a symlink
// after the check leads nowhere outside it.
//
// Thread-safe: no shared state but a probe of the kernel made once.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>
#include <vector>

namespace granary::cache {

// True when `path` is `root` or lies below it, comparing whole components ("/data2" is not
// below "/data"). Both absolute and lexically normal. Pure.
bool isWithin(const std::filesystem::path& path, const std::filesystem::path& root);

// A directory located beneath a root.
struct BeneathRoot {
  std::filesystem::path root;      // canonical (realpath)
  std::filesystem::path relative;  // below it, lexically normal; "" for the root itself
};

// Resolves `path` as the kernel would (symlinks and ".." of the part that exists, as
// std::filesystem::weakly_canonical) and returns the innermost of `roots` (each resolved too;
// those that do not exist are skipped) that holds it; nullopt when none does. Whether `path`
// exists is not told apart from being outside, so that errors say nothing of the node's files.
std::optional<BeneathRoot> locateBeneath(const std::filesystem::path& path,
                                         const std::vector<std::filesystem::path>& roots);

// True for a '/'-separated path that names something below a directory by plain names: not
// empty, not absolute, no "", "." or ".." segment, no NUL.
bool isPlainRelativePath(std::string_view path);

// How openBeneath() resolves.
enum class BeneathResolver {
  kAuto,    // kKernel where the kernel has openat2(2) (Linux 5.6), else kWalk
  kKernel,  // openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
  kWalk,    // one component at a time with openat(O_NOFOLLOW), each symlink read and resolved
            // here under the same rules
};

// Whether this kernel (and its seccomp filter) lets a process call openat2(2). Probed once.
bool kernelResolvesBeneath();

// Opens `relative` ('/'-separated; "" or "." is the directory itself) below the directory
// `rootFd` as openat(2) with `flags` would (O_CLOEXEC is added), except that no step of the
// resolution leaves the directory: ".." above it, absolute symlinks and symlinks leading out are
// refused with EXDEV, /proc's magic links with ELOOP (kKernel) or EXDEV (kWalk). Symlinks that
// stay beneath are followed, as are mount points. Returns the new descriptor, or -errno.
int openBeneath(int rootFd, std::string_view relative, int flags,
                BeneathResolver resolver = BeneathResolver::kAuto);

}  // namespace granary::cache
