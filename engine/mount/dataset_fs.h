// A dataset generation as a read-only POSIX directory: a FUSE file system (libfuse3 low-level
// API, multi-threaded) over a DatasetCache. Names and attributes come from the manifest, never
// the origin; a generation never changes, so the kernel may keep entries, attributes and file
// pages for as long as it likes. A read of a chunk that is not on this node blocks for that
// chunk only (fetched from a peer or the origin), and is accounted to its reader. Where the
// kernel allows, a file cached whole in one chunk is passed through: the kernel reads the
// chunk's file itself (MountOptions::passthrough, engine/mount/passthrough.h).
//
// The FUSE connection can outlive the process: fd() is handed to a keeper, and a new process
// adopts it (adopt()), so readers of the mount block during a restart instead of failing.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/dataset_cache.h"
#include "engine/mount/reader_accounting.h"

struct fuse_session;
struct fuse_conn_info;

namespace granary::cache {

struct MountOptions {
  int maxThreads = 64;     // FUSE request threads at most (reads block on misses)
  bool allowOther = true;  // other users (pods) may read the mount
  // Where the kernel has FUSE passthrough (Linux 6.9+), files held whole in one cached chunk are
  // read by the kernel from the chunk's file (verified, engine/mount/passthrough.h), not copied
  // through this process. Without it (or with false), every read goes through this process.
  bool passthrough = true;
  // ... if the dataset's files average at least this many bytes (weighed at the first open):
  // passthrough costs each open a request to this process, which reads through the page cache
  // do not make, and for small files that costs more than the copy it saves (mount_bench).
  int64_t passthroughMinAverageFileBytes = 4 << 20;
  // Where the mount keeps which of its files are passed through (passthrough::BackingFiles), for
  // a process that adopts it after a restart; empty: in memory, for a mount no one adopts.
  // Removed when the mount ends.
  std::filesystem::path passthroughTable;
};

class DatasetFilesystem {
 public:
  // Mounts `cache` read-only at `mountpoint` (created if missing) and serves it.
  // Unavailable when the mount fails (e.g. no /dev/fuse).
  static Result<std::unique_ptr<DatasetFilesystem>> mount(std::shared_ptr<DatasetCache> cache,
                                                          const std::filesystem::path& mountpoint,
                                                          ReaderAccounting* accounting,
                                                          MountOptions options = {});
  // Mounts `dataset` ("namespace/name") read-only at `mountpoint` before its cache is ready:
  // requests wait until serve() is given it, so that readers never see the empty directory
  // below the mount meanwhile.
  static Result<std::unique_ptr<DatasetFilesystem>> mountPending(
      const std::string& dataset, const std::filesystem::path& mountpoint,
      ReaderAccounting* accounting, MountOptions options = {});
  // The dataset a pending mount serves from now on (its requests waiting meanwhile go on).
  void serve(std::shared_ptr<DatasetCache> cache);
  // Serves an existing FUSE connection (a descriptor a previous process mounted and a keeper
  // held) mounted at `mountpoint`; takes ownership of `fuseFd`. Requests the previous process
  // had read but not answered are sent again where the kernel supports it (Linux 6.9+).
  static Result<std::unique_ptr<DatasetFilesystem>> adopt(std::shared_ptr<DatasetCache> cache,
                                                          int fuseFd,
                                                          const std::filesystem::path& mountpoint,
                                                          ReaderAccounting* accounting,
                                                          MountOptions options = {});
  // Stops serving and unmounts (unless detach() was called).
  ~DatasetFilesystem();
  DatasetFilesystem(const DatasetFilesystem&) = delete;
  DatasetFilesystem& operator=(const DatasetFilesystem&) = delete;

  // The FUSE connection's descriptor (to hand to a keeper with SCM_RIGHTS).
  int fd() const;
  // False once the mount has gone (e.g. unmounted from outside).
  bool serving() const;
  // Whether files cached whole are passed through on this connection: the kernel has
  // passthrough, it was wanted (by this process or the one it adopted the connection from), the
  // kernel took the backing files so far, and the dataset's files were not found too small at
  // the first open.
  bool passesThrough() const;
  // How many opens were passed through so far.
  int64_t opensPassedThrough() const;
  const std::filesystem::path& mountpoint() const { return mountpoint_; }
  const std::shared_ptr<DatasetCache>& cache() const { return cache_; }
  // On destruction, stop serving but leave the mount in place for a process that adopts it.
  void detach() { detached_ = true; }
  bool detached() const { return detached_; }

  struct State;  // what the request handlers see

 private:
  DatasetFilesystem() = default;
  static Result<std::unique_ptr<DatasetFilesystem>> start(std::shared_ptr<DatasetCache> cache,
                                                          const std::string& dataset,
                                                          const std::string& mountTarget,
                                                          const std::filesystem::path& mountpoint,
                                                          ReaderAccounting* accounting,
                                                          MountOptions options, bool adopted);

  std::shared_ptr<DatasetCache> cache_;
  std::filesystem::path mountpoint_;
  std::filesystem::path passthroughTable_;
  std::unique_ptr<State> state_;
  fuse_session* session_ = nullptr;
  bool detached_ = false;
  struct Loop;
  std::unique_ptr<Loop> loop_;
};

struct MountEntry {
  std::string source, point, type;  // e.g. "granary:ml/coco", "/mnt/x", "fuse.granary"
};
// This process's view of the mounts (/proc/self/mounts), in mount order.
std::vector<MountEntry> currentMounts();

// What every granary mount asks of the kernel in its INIT: 16 MiB read-ahead with 64
// background requests, asynchronous reads, parallel directory operations, no write-back cache.
void askMountSettings(fuse_conn_info* conn);
// Serves `session`'s requests until it ends: up to `maxThreads` threads read one descriptor.
void serveRequests(fuse_session* session, int maxThreads);

// Whether `path` is a FUSE mount whose daemon is gone ("transport endpoint is not connected").
bool isStaleMount(const std::filesystem::path& path);
// Unmounts `path` if it is such a mount; returns whether it did.
bool cleanStaleMount(const std::filesystem::path& path);

}  // namespace granary::cache
