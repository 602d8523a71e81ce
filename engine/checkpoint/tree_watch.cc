#include "engine/checkpoint/tree_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "common/log.h"
#include "common/owned_fd.h"
#include "engine/checkpoint/drain_plan.h"

namespace granary::checkpoint {
namespace {

// Puts what a scan found in the order its files were likely closed: by modification time, the
// files that mark a checkpoint complete after every other (their order is what the drain keeps).
void inClosingOrder(std::vector<TreeEvent>& found) {
  std::stable_sort(found.begin(), found.end(), [](const TreeEvent& a, const TreeEvent& b) {
    const bool markerA = isCompletionMarker(a.path), markerB = isCompletionMarker(b.path);
    if (markerA != markerB) return markerB;
    return a.identity.modifiedNanos < b.identity.modifiedNanos;
  });
}

constexpr uint32_t kMask = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE |
                           IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK;

std::string joined(const std::string& directory, std::string_view name) {
  return directory.empty() ? std::string(name) : directory + "/" + std::string(name);
}

bool isSymlink(const std::filesystem::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

bool isBelowOrAt(const std::string& path, const std::string& directory) {
  return path == directory ||
         (path.size() > directory.size() && path.compare(0, directory.size(), directory) == 0 &&
          path[directory.size()] == '/');
}

class InotifyTreeWatch final : public TreeWatch {
 public:
  InotifyTreeWatch(std::filesystem::path root, Sink sink, OwnedFd inotify, OwnedFd wake)
      : root_(std::move(root)),
        sink_(std::move(sink)),
        inotify_(std::move(inotify)),
        wake_(std::move(wake)) {}

  ~InotifyTreeWatch() override {
    const uint64_t one = 1;
    if (thread_.joinable()) {
      (void)!::write(wake_.get(), &one, sizeof one);
      thread_.join();
    }
  }

  Status begin() {
    std::vector<TreeEvent> found;
    GRANARY_RETURN_IF_ERROR(watchAndScan("", found));
    inClosingOrder(found);
    sink_(std::move(found));
    thread_ = std::thread([this] { run(); });
    return Status::ok();
  }

 private:
  // Watches `directory` and everything below it, adding a closed event for each regular file.
  Status watchAndScan(const std::string& directory, std::vector<TreeEvent>& found) {
    const std::filesystem::path absolute = directory.empty() ? root_ : root_ / directory;
    const int wd = ::inotify_add_watch(inotify_.get(), absolute.c_str(), kMask);
    if (wd < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return Status::ok();  // gone already
      if (errno == ENOSPC)
        return unavailable("cannot watch " + absolute.string() +
                           ": the node's fs.inotify.max_user_watches is reached; raise it");
      return unavailable("cannot watch " + absolute.string() + ": " + std::strerror(errno));
    }
    directories_[wd] = directory;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(absolute, error)) {
      const std::string path = joined(directory, entry.path().filename().string());
      std::error_code typeError;
      if (entry.is_symlink(typeError)) {
        found.push_back({.kind = TreeEvent::Kind::kLink, .path = path});
      } else if (entry.is_directory(typeError)) {
        GRANARY_RETURN_IF_ERROR(watchAndScan(path, found));
      } else if (const auto identity = identityOf(entry.path())) {
        found.push_back({.kind = TreeEvent::Kind::kClosed, .path = path, .identity = *identity});
      }
    }
    return Status::ok();
  }

  void unwatchBelow(const std::string& directory) {
    for (auto it = directories_.begin(); it != directories_.end();) {
      if (isBelowOrAt(it->second, directory)) {
        ::inotify_rm_watch(inotify_.get(), it->first);
        it = directories_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void rescan(std::vector<TreeEvent>& events) {
    for (const auto& [wd, directory] : directories_) ::inotify_rm_watch(inotify_.get(), wd);
    directories_.clear();
    std::vector<TreeEvent> found;
    if (Status s = watchAndScan("", found); !s.isOk())
      log_.error("rescan failed", {{"tree", root_.string()}, {"error", s}});
    inClosingOrder(found);
    TreeEvent all{.kind = TreeEvent::Kind::kRescanned};
    for (TreeEvent& e : found) {
      all.all.insert(e.path);
      events.push_back(std::move(e));
    }
    events.push_back(std::move(all));
  }

  void handle(const inotify_event& e, std::vector<TreeEvent>& events) {
    const auto dir = directories_.find(e.wd);
    if (dir == directories_.end() || e.len == 0)
      return;  // the watch was removed, or the dir itself
    const std::string path = joined(dir->second, e.name);
    const bool isDirectory = (e.mask & IN_ISDIR) != 0;
    if (e.mask & (IN_MOVED_FROM | IN_DELETE)) {
      if (isDirectory) unwatchBelow(path);
      events.push_back({.kind = TreeEvent::Kind::kRemoved, .path = path, .directory = isDirectory});
    } else if (isDirectory && (e.mask & (IN_CREATE | IN_MOVED_TO))) {
      std::vector<TreeEvent> found;
      if (Status s = watchAndScan(path, found); !s.isOk())
        log_.error("cannot watch a new directory", {{"error", s}});
      inClosingOrder(found);
      events.insert(events.end(), std::make_move_iterator(found.begin()),
                    std::make_move_iterator(found.end()));
    } else if ((e.mask & (IN_CREATE | IN_MOVED_TO)) && isSymlink(root_ / path)) {
      events.push_back({.kind = TreeEvent::Kind::kLink, .path = path});
    } else if (e.mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) {
      if (const auto identity = identityOf(root_ / path))
        events.push_back({.kind = TreeEvent::Kind::kClosed, .path = path, .identity = *identity});
    } else if (e.mask & IN_MODIFY) {
      events.push_back({.kind = TreeEvent::Kind::kWriting, .path = path});
    }
  }

  void run() {
    alignas(inotify_event) char buffer[64 * 1024];
    for (;;) {
      pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
      if (fds[1].revents) return;
      std::vector<TreeEvent> events;
      for (;;) {
        const ssize_t n = ::read(inotify_.get(), buffer, sizeof buffer);
        if (n <= 0) break;
        for (ssize_t at = 0; at < n;) {
          const auto* e = reinterpret_cast<const inotify_event*>(buffer + at);
          at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
          if (e->mask & IN_Q_OVERFLOW) {
            log_.warn("inotify queue overflowed; rescanning", {{"tree", root_.string()}});
            rescan(events);
          } else {
            handle(*e, events);
          }
        }
      }
      if (!events.empty()) sink_(std::move(events));
    }
  }

  const std::filesystem::path root_;
  const Sink sink_;
  OwnedFd inotify_;
  OwnedFd wake_;
  std::map<int, std::string> directories_;  // watch -> directory below the root ("" the root)
  std::thread thread_;
  const Logger log_{"checkpoints"};
};

}  // namespace

FileIdentity identityOf(const struct stat& st) {
  return FileIdentity{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                      static_cast<int64_t>(st.st_size),
                      static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}

std::optional<FileIdentity> identityOf(const std::filesystem::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return identityOf(st);
}

Result<std::unique_ptr<TreeWatch>> TreeWatch::start(const std::filesystem::path& root, Sink sink) {
  OwnedFd inotify(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify)
    return unavailable(
        std::string("cannot watch checkpoints: inotify_init1: ") + std::strerror(errno) +
        (errno == EMFILE ? " (raise the node's fs.inotify.max_user_instances)" : ""));
  OwnedFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return unavailable(std::string("eventfd: ") + std::strerror(errno));
  auto watch = std::make_unique<InotifyTreeWatch>(root, std::move(sink), std::move(inotify),
                                                  std::move(wake));
  GRANARY_RETURN_IF_ERROR(watch->begin());
  return std::unique_ptr<TreeWatch>(std::move(watch));
}

}  // namespace granary::checkpoint
