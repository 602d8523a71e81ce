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
#include "common/unix_socket.h"
#include "engine/mount/scratch_mount.h"

namespace granary::cache {

namespace {

using unix_socket::receiveMessage;
using unix_socket::sendMessage;

constexpr std::chrono::seconds kAnswerWait{10};

std::string requestOf(const Secret& token, std::string_view verb) {
  return unix_socket::requestOf(kKeeperProtocol, token, verb);
}

// Sends one request and expects "ok".
Status ask(const std::filesystem::path& socketPath, const std::string& request, int fd = -1) {
  GRANARY_ASSIGN_OR_RETURN(const OwnedFd socket, unix_socket::connectTo(socketPath, kAnswerWait));
  std::string answer;
  OwnedFd none;
  if (!sendMessage(socket.get(), request, fd) || !receiveMessage(socket.get(), answer, none))
    return unavailable("the mount keeper at " + socketPath.string() + " did not answer");
  if (answer != "ok")
    return unavailable("the mount keeper at " + socketPath.string() + " answered: " + answer);
  return Status::ok();
}

// What a keeper answers to "list" or "handover": its descriptors by mount point, and for a
// hand-over its listening socket.
struct KeptAnswer {
  std::map<std::string, OwnedFd> kept;
  OwnedFd listener;
};

Result<KeptAnswer> askKept(const std::filesystem::path& socketPath, const std::string& request) {
  GRANARY_ASSIGN_OR_RETURN(const OwnedFd socket, unix_socket::connectTo(socketPath, kAnswerWait));
  if (!sendMessage(socket.get(), request))
    return unavailable("the mount keeper at " + socketPath.string() + " did not answer");
  KeptAnswer answer;
  std::string message;
  OwnedFd fd;
  while (receiveMessage(socket.get(), message, fd)) {
    if (message == "end") return answer;
    if (message.starts_with("fd ") && fd.get() >= 0) {
      answer.kept[message.substr(3)] = std::move(fd);
    } else if (message == "listener" && fd.get() >= 0) {
      answer.listener = std::move(fd);
    } else {
      return unavailable("the mount keeper at " + socketPath.string() + " answered: " + message);
    }
  }
  return unavailable("the mount keeper at " + socketPath.string() + " ended its answer early");
}

}  // namespace

// ---- the keeper ----

Result<std::unique_ptr<MountKeeper>> MountKeeper::listen(const std::filesystem::path& socketPath,
                                                         Secret token) {
  std::unique_ptr<MountKeeper> keeper(new MountKeeper());
  keeper->socketPath_ = socketPath;
  keeper->token_ = std::move(token);
  keeper->takeOver();
  if (keeper->listener_.get() < 0) {
    auto listener = unix_socket::listenAt(socketPath);
    if (!listener.isOk()) return unavailable("mountKeeperSocket: " + listener.status().message());
    keeper->listener_ = std::move(*listener);
  }
  return keeper;
}

void MountKeeper::takeOver() {
  const Logger log("mount-keeper");
  if (!unix_socket::connectTo(socketPath_, kAnswerWait).isOk()) return;  // no keeper there
  auto answer = askKept(socketPath_, requestOf(token_, "handover"));
  if (!answer.isOk()) {
    log.warn(
        "the keeper listening at the socket cannot hand over (an older protocol, or another "
        "node's token): the mounts it keeps end with it, and their readers' pods need a "
        "restart",
        {{"socket", socketPath_.string()}, {"error", answer.status()}});
    return;
  }
  kept_ = std::move(answer->kept);
  listener_ = std::move(answer->listener);
  log.info("took over the mounts of the keeper it replaces", {{"mounts", kept_.size()}});
}

MountKeeper::~MountKeeper() {
  std::error_code error;
  if (listener_.get() >= 0) std::filesystem::remove(socketPath_, error);
}

void MountKeeper::serve(std::stop_token stop) {
  while (!stop.stop_requested()) {
    pollfd listener{listener_.get(), POLLIN, 0};  // -1 once handed over: poll only waits
    if (::poll(&listener, 1, 200) > 0 && (listener.revents & POLLIN)) {
      const OwnedFd connection = unix_socket::acceptFrom(listener_.get(), std::chrono::seconds(2));
      if (connection.get() >= 0) answer(connection.get());
    }
    forgetEnded();
  }
}

void MountKeeper::answer(int connection) {
  const Logger log("mount-keeper");
  std::string request;
  OwnedFd fd;
  if (!receiveMessage(connection, request, fd)) return;
  const auto asked = unix_socket::verbOf(request, kKeeperProtocol, token_);
  if (!asked.isOk()) {
    if (asked.status().code() == StatusCode::kUnauthenticated)
      log.warn("a request with a wrong token was refused");
    sendMessage(connection, asked.status().message());
    return;
  }
  const std::string& verb = *asked;
  if (verb.starts_with("keep ") && fd.get() >= 0) {
    const std::string key = verb.substr(5);
    kept_[key] = std::move(fd);
    log.info("keeping a mount", {{"mountpoint", key}});
    sendMessage(connection, "ok");
  } else if (verb.starts_with("drop ")) {
    if (kept_.erase(verb.substr(5)) > 0) log.info("mount let go", {{"mountpoint", verb.substr(5)}});
    sendMessage(connection, "ok");
  } else if (verb == "list" || verb == "handover") {
    for (const auto& [key, kept] : kept_) sendMessage(connection, "fd " + key, kept.get());
    if (verb == "handover" && sendMessage(connection, "listener", listener_.get())) {
      listener_.reset();  // the successor accepts on it now
      log.info(
          "handed the mounts over to the keeper replacing this one; keeping copies until it "
          "stops",
          {{"mounts", kept_.size()}});
    }
    sendMessage(connection, "end");
  } else {
    sendMessage(connection, "unknown request: " + verb);
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

Status KeeperClient::keep(const std::string& mountpoint, int fuseFd) const {
  return ask(socketPath_, requestOf(token_, "keep " + mountpoint), fuseFd);
}

Status KeeperClient::drop(const std::string& mountpoint) const {
  return ask(socketPath_, requestOf(token_, "drop " + mountpoint));
}

Result<std::map<std::string, OwnedFd>> KeeperClient::kept() const {
  GRANARY_ASSIGN_OR_RETURN(KeptAnswer answer, askKept(socketPath_, requestOf(token_, "list")));
  return std::move(answer.kept);
}

bool KeeperClient::listening() const {
  return !socketPath_.empty() && unix_socket::connectTo(socketPath_, kAnswerWait).isOk();
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

}  // namespace granary::cache
