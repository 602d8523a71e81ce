// throttled-mount: a slow origin for benchmarks. Mirrors the directory SRC read-only at MNT and
// passes all reads, from every file and thread together, through one token bucket of --rate
// bytes a second (burst: a tenth of a second's worth). Files are opened with direct_io, so the
// kernel's page cache never answers a read: every read pays, as from a remote store.
//
//   throttled-mount SRC MNT --rate BYTES_PER_SECOND   (e.g. --rate 10Mi)
//
// Runs in the foreground until SIGINT or SIGTERM, then unmounts. Needs /dev/fuse (root, or
// fusermount3). Used by bench/local_run.sh.
#define FUSE_USE_VERSION 314

#include <dirent.h>
#include <fcntl.h>
#include <fuse3/fuse.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/flags.h"
#include "common/quantity.h"
#include "engine/core/bandwidth_limiter.h"

namespace {

// Set once in main before the mount serves; read by every FUSE thread.
std::string source;                                        // SRC, without a trailing slash
std::unique_ptr<granary::cache::BandwidthLimiter> origin;  // the one shared throttle

std::string sourcePath(const char* path) { return source + path; }

int getattrOp(const char* path, struct stat* st, fuse_file_info* fi) {
  const int result =
      fi != nullptr ? ::fstat(static_cast<int>(fi->fh), st) : ::lstat(sourcePath(path).c_str(), st);
  if (result != 0) return -errno;
  st->st_mode &= ~static_cast<mode_t>(0222);  // read-only
  return 0;
}

int readdirOp(const char* path, void* buffer, fuse_fill_dir_t fill, off_t /*offset*/,
              fuse_file_info* /*fi*/, fuse_readdir_flags /*flags*/) {
  DIR* dir = ::opendir(sourcePath(path).c_str());
  if (dir == nullptr) return -errno;
  while (const dirent* entry = ::readdir(dir)) {
    struct stat st {};
    st.st_ino = entry->d_ino;
    st.st_mode = static_cast<mode_t>(DTTOIF(entry->d_type));
    if (fill(buffer, entry->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) break;
  }
  ::closedir(dir);
  return 0;
}

int openOp(const char* path, fuse_file_info* fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  const int fd = ::open(sourcePath(path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  fi->direct_io = 1;  // no page cache: a second read of the same bytes reaches us again
  return 0;
}

// Reads, then waits until the bucket has paid for the bytes read, so the caller sees them at
// the origin's rate whatever the local disk could do.
int readOp(const char* /*path*/, char* buffer, size_t size, off_t offset, fuse_file_info* fi) {
  const ssize_t got = ::pread(static_cast<int>(fi->fh), buffer, size, offset);
  if (got < 0) return -errno;
  origin->acquire(got);
  return static_cast<int>(got);
}

int releaseOp(const char* /*path*/, fuse_file_info* fi) {
  ::close(static_cast<int>(fi->fh));
  return 0;
}

int statfsOp(const char* path, struct statvfs* st) {
  return ::statvfs(sourcePath(path).c_str(), st) == 0 ? 0 : -errno;
}

void* initOp(fuse_conn_info* /*conn*/, fuse_config* config) {
  config->use_ino = 1;    // the source's inode numbers
  config->direct_io = 1;  // for every open, as openOp also asks
  config->kernel_cache = 0;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mountPoint;
  std::string rateText;
  CLI::App app(
      "Mirrors SRC read-only at MNT, all reads throttled together to --rate bytes/s "
      "and never served from the page cache: a slow origin for benchmarks.",
      "throttled-mount");
  app.add_option("SRC", source, "directory to mirror")->required()->check(CLI::ExistingDirectory);
  app.add_option("MNT", mountPoint, "empty directory to mount at")
      ->required()
      ->check(CLI::ExistingDirectory);
  app.add_option("--rate", rateText, "bytes per second for all reads together, e.g. 10Mi")
      ->required();
  if (auto exitCode = granary::parseCommandLine(app, argc, argv)) return *exitCode;
  const auto rate = granary::parseByteSize(rateText);
  if (!rate.isOk() || rate->bytes <= 0) {
    std::fprintf(stderr,
                 "throttled-mount: --rate: \"%s\" is not a positive byte count; give "
                 "one, e.g. --rate 10Mi or --rate 10485760\n",
                 rateText.c_str());
    return 2;
  }
  source = std::filesystem::absolute(source).lexically_normal().string();
  while (source.size() > 1 && source.back() == '/') source.pop_back();
  origin = std::make_unique<granary::cache::BandwidthLimiter>(
      granary::realClock(), rate->bytes, std::max<int64_t>(1, rate->bytes / 10));

  fuse_operations ops{};
  ops.getattr = getattrOp;
  ops.readdir = readdirOp;
  ops.open = openOp;
  ops.read = readOp;
  ops.release = releaseOp;
  ops.statfs = statfsOp;
  ops.init = initOp;

  // allow_other: any user may read it, as from a shared store.
  char program[] = "throttled-mount", option[] = "-o",
       options[] = "ro,allow_other,fsname=throttled";
  char* fuseArgv[] = {program, option, options, nullptr};
  fuse_args args = FUSE_ARGS_INIT(3, fuseArgv);
  fuse* fs = fuse_new(&args, &ops, sizeof ops, nullptr);
  if (fs == nullptr) return 1;  // libfuse printed why
  int code = 1;
  if (fuse_mount(fs, mountPoint.c_str()) == 0) {
    if (fuse_set_signal_handlers(fuse_get_session(fs)) == 0) {
      std::fprintf(stderr, "throttled-mount: %s at %s, reads at %lld B/s\n", source.c_str(),
                   mountPoint.c_str(), static_cast<long long>(rate->bytes));
      // Returns after SIGINT/SIGTERM with the signal's number; below 0 on an error.
      code = fuse_loop_mt(fs, nullptr) < 0 ? 1 : 0;
      fuse_remove_signal_handlers(fuse_get_session(fs));
    }
    fuse_unmount(fs);
  }
  fuse_destroy(fs);
  return code;
}
