#include "engine/mount/mount_keeper.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "engine/mount/scratch_mount.h"

namespace granary::cache {

namespace {

constexpr size_t kMaxMessage = 4096;

Result<sockaddr_un> addressOf(const std::filesystem::path& socketPath) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socketPath.string().size() >= sizeof address.sun_path)
    return invalidArgument("mountKeeperSocket: " + socketPath.string() +
                           " is too long for a unix socket; use a shorter path");
  std::strncpy(address.sun_path, socketPath.c_str(), sizeof address.sun_path - 1);
  return address;
}

// One message, with a descriptor attached when `fd` >= 0.
bool sendMessage(int socket, const std::string& text, int fd = -1) {
  iovec part{const_cast<char*>(text.data()), text.size()};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
  }
  return ::sendmsg(socket, &message, MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// One message and the descriptor it carries, if any. False at the end of the connection, on
// an error or after the socket's receive timeout.
bool receiveMessage(int socket, std::string& text, OwnedFd& fd) {
  text.assign(kMaxMessage, '\0');
  iovec part{text.data(), text.size()};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const ssize_t got = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  if (got <= 0) return false;
  text.resize(static_cast<size_t>(got));
  fd = OwnedFd();
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      int received;
      std::memcpy(&received, CMSG_DATA(header), sizeof received);
      fd = OwnedFd(received);
    }
  }
  return true;
}

void setTimeout(int socket, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = (timeout.count() % 1000) * 1000;
  ::setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

Result<OwnedFd> connectTo(const std::filesystem::path& socketPath) {
  GRANARY_ASSIGN_OR_RETURN(const sockaddr_un address, addressOf(socketPath));
  OwnedFd socket(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (socket.get() < 0 ||
      ::connect(socket.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    return unavailable("cannot reach the mount keeper at " + socketPath.string() + ": " +
                       std::strerror(errno));
  setTimeout(socket.get(), std::chrono::seconds(10));
  return socket;
}

// Sends one request and expects "ok".
Status ask(const std::filesystem::path& socketPath, const std::string& request, int fd = -1) {
  GRANARY_ASSIGN_OR_RETURN(const OwnedFd socket, connectTo(socketPath));
  std::string answer;
  OwnedFd none;
  if (!sendMessage(socket.get(), request, fd) || !receiveMessage(socket.get(), answer, none))
    return unavailable("the mount keeper at " + socketPath.string() + " did not answer");
  if (answer != "ok")
    return unavailable("the mount keeper at " + socketPath.string() + " answered: " + answer);
  return Status::ok();
}

}  // namespace

// ---- the keeper ----

Result<std::unique_ptr<MountKeeper>> MountKeeper::listen(const std::filesystem::path& socketPath) {
  GRANARY_ASSIGN_OR_RETURN(const sockaddr_un address, addressOf(socketPath));
  std::error_code error;
  std::filesystem::create_directories(socketPath.parent_path(), error);
  std::filesystem::remove(socketPath, error);
  std::unique_ptr<MountKeeper> keeper(new MountKeeper());
  keeper->socketPath_ = socketPath;
  keeper->listener_ = OwnedFd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (keeper->listener_.get() < 0 ||
      ::bind(keeper->listener_.get(), reinterpret_cast<const sockaddr*>(&address),
             sizeof address) != 0 ||
      ::chmod(socketPath.c_str(), 0600) != 0 || ::listen(keeper->listener_.get(), 16) != 0)
    return unavailable("cannot listen on " + socketPath.string() + ": " + std::strerror(errno));
  return keeper;
}

MountKeeper::~MountKeeper() {
  std::error_code error;
  if (listener_.get() >= 0) std::filesystem::remove(socketPath_, error);
}

void MountKeeper::serve(std::stop_token stop) {
  while (!stop.stop_requested()) {
    pollfd listener{listener_.get(), POLLIN, 0};
    if (::poll(&listener, 1, 200) > 0 && (listener.revents & POLLIN)) {
      const OwnedFd connection(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (connection.get() >= 0) {
        setTimeout(connection.get(), std::chrono::seconds(2));
        answer(connection.get());
      }
    }
    forgetEnded();
  }
}

void MountKeeper::answer(int connection) {
  const Logger log("mount-keeper");
  std::string request;
  OwnedFd fd;
  if (!receiveMessage(connection, request, fd)) return;
  if (request.starts_with("keep ") && fd.get() >= 0) {
    const std::string key = request.substr(5);
    kept_[key] = std::move(fd);
    log.info("keeping a mount", {{"mountpoint", key}});
    sendMessage(connection, "ok");
  } else if (request.starts_with("drop ")) {
    if (kept_.erase(request.substr(5)) > 0)
      log.info("mount let go", {{"mountpoint", request.substr(5)}});
    sendMessage(connection, "ok");
  } else if (request == "list") {
    for (const auto& [key, kept] : kept_) sendMessage(connection, "fd " + key, kept.get());
    sendMessage(connection, "end");
  } else {
    sendMessage(connection, "unknown request");
  }
}

void MountKeeper::forgetEnded() {
  // A FUSE descriptor polls POLLERR once its connection ended; no events are asked for, so
  // queued requests do not wake the keeper.
  std::vector<pollfd> watched;
  for (const auto& [_, fd] : kept_) watched.push_back({fd.get(), 0, 0});
  if (watched.empty() || ::poll(watched.data(), watched.size(), 0) <= 0) return;
  size_t i = 0;
  for (auto it = kept_.begin(); it != kept_.end(); ++i) {
    if (watched[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      Logger("mount-keeper").info("mount ended", {{"mountpoint", it->first}});
      it = kept_.erase(it);
    } else {
      ++it;
    }
  }
}

// ---- the cache node's side ----

Status keepMount(const std::filesystem::path& socketPath, const std::string& mountpoint,
                 int fuseFd) {
  return ask(socketPath, "keep " + mountpoint, fuseFd);
}

Status dropMount(const std::filesystem::path& socketPath, const std::string& mountpoint) {
  return ask(socketPath, "drop " + mountpoint);
}

bool keeperListening(const std::filesystem::path& socketPath) {
  return connectTo(socketPath).isOk();
}

namespace {

std::string kernelRelease() {
  utsname name{};
  return ::uname(&name) == 0 ? name.release : "unknown";
}

}  // namespace

Status checkMountRecovery(const std::filesystem::path& scratchDirectory,
                          const std::filesystem::path& device) {
  ScratchFuseMount scratch(scratchDirectory / ".mount-recovery-probe");
  GRANARY_RETURN_IF_ERROR(scratch.mount(device));
  // The descriptor over a unix socket, as the node hands it to the keeper and takes it back.
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return failedPrecondition(std::string("cannot create a unix socket: ") + std::strerror(errno));
  const OwnedFd sender(pair[0]), receiver(pair[1]);
  std::string text;
  OwnedFd passed;
  if (!sendMessage(sender.get(), "keep", scratch.fd()) ||
      !receiveMessage(receiver.get(), text, passed) || passed.get() < 0) {
    return failedPrecondition(
        std::string("a FUSE descriptor cannot be passed over a unix socket (SCM_RIGHTS): ") +
        std::strerror(errno));
  }
  // FUSE_NOTIFY_RESEND on the passed descriptor: the kernel answers EINVAL to a notification it
  // does not know.
  constexpr int32_t kNotifyResend = 7;
  fuse_out_header resend{};
  resend.len = sizeof resend;
  resend.error = kNotifyResend;
  if (::write(passed.get(), &resend, sizeof resend) != static_cast<ssize_t>(sizeof resend)) {
    return failedPrecondition("kernel " + kernelRelease() +
                              " cannot resend the FUSE requests a stopped process had read "
                              "(FUSE_NOTIFY_RESEND, Linux 6.9+; it answered: " +
                              std::strerror(errno) +
                              "): readers in the middle of a read when the node stopped would "
                              "wait forever");
  }
  return Status::ok();
}

Result<std::map<std::string, OwnedFd>> keptMounts(const std::filesystem::path& socketPath) {
  GRANARY_ASSIGN_OR_RETURN(const OwnedFd socket, connectTo(socketPath));
  if (!sendMessage(socket.get(), "list"))
    return unavailable("the mount keeper at " + socketPath.string() + " did not answer");
  std::map<std::string, OwnedFd> kept;
  std::string message;
  OwnedFd fd;
  while (receiveMessage(socket.get(), message, fd)) {
    if (message == "end") return kept;
    if (message.starts_with("fd ") && fd.get() >= 0) kept[message.substr(3)] = std::move(fd);
  }
  return unavailable("the mount keeper at " + socketPath.string() + " ended its list early");
}

}  // namespace granary::cache
