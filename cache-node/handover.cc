#include "cache-node/handover.h"

#include <fcntl.h>
#include <poll.h>

#include "common/log.h"
#include "common/unix_socket.h"

namespace granary::cache {

namespace {

using unix_socket::receiveMessage;
using unix_socket::sendMessage;

constexpr std::string_view kEnsure = "ensure ";

}  // namespace

Result<std::unique_ptr<HandoverListener>> HandoverListener::listen(
    const std::filesystem::path& socketPath, Secret token, std::function<void()> onRequest) {
  auto listening = unix_socket::listenAt(socketPath);
  if (!listening.isOk()) return unavailable("hand-over socket: " + listening.status().message());
  std::unique_ptr<HandoverListener> listener(new HandoverListener());
  listener->socketPath_ = socketPath;
  listener->token_ = std::move(token);
  listener->listener_ = std::move(*listening);
  listener->onRequest_ = std::move(onRequest);
  listener->thread_ =
      std::jthread([raw = listener.get()](std::stop_token stop) { raw->serve(stop); });
  return listener;
}

HandoverListener::~HandoverListener() {
  thread_ = {};  // stopped and joined
  // Once released, the socket file is the successor's to listen at.
  if (!requested()) ::unlink(socketPath_.c_str());
}

bool HandoverListener::requested() const {
  MutexLock lock(mutex_);
  return requested_;
}

void HandoverListener::release(Result<std::vector<std::string>> ensured) {
  {
    MutexLock lock(mutex_);
    answer_ = std::move(ensured);
  }
  released_.notify_all();
}

void HandoverListener::serve(std::stop_token stop) {
  while (!stop.stop_requested()) {
    pollfd listener{listener_.get(), POLLIN, 0};
    if (::poll(&listener, 1, 200) <= 0 || !(listener.revents & POLLIN)) continue;
    const OwnedFd connection = unix_socket::acceptFrom(listener_.get(), std::chrono::seconds(5));
    if (connection.get() < 0) continue;
    answer(connection.get(), stop);
  }
}

void HandoverListener::answer(int connection, std::stop_token stop) {
  const Logger log("handover");
  std::string request;
  OwnedFd none;
  if (!receiveMessage(connection, request, none)) return;
  const auto asked = unix_socket::verbOf(request, kHandoverProtocol, token_);
  if (!asked.isOk()) {
    if (asked.status().code() == StatusCode::kUnauthenticated)
      log.warn("a hand-over request with a wrong token was refused");
    sendMessage(connection, asked.status().message());
    return;
  }
  if (*asked != "release") {
    sendMessage(connection, "unknown request: " + *asked);
    return;
  }
  {
    MutexLock lock(mutex_);
    if (requested_) {
      sendMessage(connection, "refused: this node was released already");
      return;
    }
    requested_ = true;
  }
  log.info("a new cache node asks for this node: releasing it");
  if (!sendMessage(connection, "releasing")) return;
  onRequest_();
  MutexLock lock(mutex_);
  if (!released_.wait(lock, stop,
                      [this]() GRANARY_REQUIRES(mutex_) { return answer_.has_value(); })) {
    sendMessage(connection, "failed: this node stopped before it was released");
    return;
  }
  if (!answer_->isOk()) {
    sendMessage(connection, "failed: " + answer_->status().message());
    return;
  }
  for (const std::string& ensured : **answer_)
    if (!sendMessage(connection, std::string(kEnsure) + ensured))
      log.warn("a dataset could not be handed over: the new node ensures it when asked again");
  sendMessage(connection, "released");
}

Result<std::optional<std::vector<std::string>>> takeOverNode(
    const std::filesystem::path& socketPath, const Secret& token) {
  auto socket = unix_socket::connectTo(socketPath, HandoverListener::kReleaseWait);
  if (!socket.isOk()) return std::optional<std::vector<std::string>>();  // none listens
  const std::string where = "the cache node at " + socketPath.string();
  Logger("handover").info("asking the cache node this one replaces to release the node");
  if (!sendMessage(socket->get(), unix_socket::requestOf(kHandoverProtocol, token, "release")))
    return unavailable(where + " did not take the request");
  std::string message;
  OwnedFd none;
  if (!receiveMessage(socket->get(), message, none)) return unavailable(where + " did not answer");
  if (message != "releasing") return unavailable(where + " answered: " + message);
  std::vector<std::string> ensured;
  while (receiveMessage(socket->get(), message, none)) {
    if (message == "released") return std::optional(std::move(ensured));
    if (!message.starts_with(kEnsure)) return unavailable(where + " answered: " + message);
    ensured.push_back(message.substr(kEnsure.size()));
  }
  return unavailable(where +
                     " ended before it released the node (killed, or it took longer "
                     "than " +
                     std::to_string(HandoverListener::kReleaseWait.count()) + " s)");
}

bool stateHeldElsewhere(const std::filesystem::path& stateDirectory) {
  const OwnedFd lock(::open((stateDirectory / "manifests" / "LOCK").c_str(), O_RDWR | O_CLOEXEC));
  if (lock.get() < 0) return false;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  return ::fcntl(lock.get(), F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
}

}  // namespace granary::cache
