#include "tests/support/tls_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace granary::testing {

struct TlsProxy::State {
  int backendPort = 0;
  int listener = -1;
  int port = 0;
  SSL_CTX* context = nullptr;
  std::atomic<bool> stopping{false};
  std::mutex mutex;  // guards sockets and threads
  std::set<int> sockets;
  std::vector<std::thread> threads;
  std::thread acceptor;

  void track(int fd) {
    std::lock_guard lock(mutex);
    sockets.insert(fd);
  }
  void untrack(int fd) {
    std::lock_guard lock(mutex);
    sockets.erase(fd);
  }

  // Pumps bytes between one TLS client and the backend until either side closes.
  void serve(int client) {
    SSL* ssl = SSL_new(context);
    SSL_set_fd(ssl, client);
    int backend = -1;
    if (SSL_accept(ssl) == 1) {
      backend = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<uint16_t>(backendPort));
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      track(backend);
      if (::connect(backend, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0)
        pump(ssl, client, backend);
    }
    SSL_shutdown(ssl);
    SSL_free(ssl);
    if (backend >= 0) {
      untrack(backend);
      ::close(backend);
    }
    untrack(client);
    ::close(client);
  }

  void pump(SSL* ssl, int client, int backend) {
    char buffer[16384];
    while (!stopping) {
      pollfd fds[2] = {{client, POLLIN, 0}, {backend, POLLIN, 0}};
      if (SSL_pending(ssl) == 0 && ::poll(fds, 2, 200) <= 0) continue;
      if (SSL_pending(ssl) > 0 || (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
        const int n = SSL_read(ssl, buffer, sizeof buffer);
        if (n <= 0) {
          const int error = SSL_get_error(ssl, n);
          if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) continue;
          return;
        }
        if (::send(backend, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) != n) return;
      }
      if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t n = ::recv(backend, buffer, sizeof buffer, 0);
        if (n <= 0) return;
        if (SSL_write(ssl, buffer, static_cast<int>(n)) != n) return;
      }
    }
  }
};

TlsProxy::TlsProxy(std::unique_ptr<State> state) : state_(std::move(state)) {}

TlsProxy::~TlsProxy() {
  state_->stopping = true;
  ::shutdown(state_->listener, SHUT_RDWR);
  ::close(state_->listener);
  state_->acceptor.join();
  {
    std::lock_guard lock(state_->mutex);
    for (int fd : state_->sockets) ::shutdown(fd, SHUT_RDWR);
  }
  for (auto& thread : state_->threads) thread.join();
  SSL_CTX_free(state_->context);
}

int TlsProxy::port() const { return state_->port; }

Result<std::unique_ptr<TlsProxy>> TlsProxy::start(int backendPort,
                                                  const std::filesystem::path& certificateFile,
                                                  const std::filesystem::path& clientCaFile) {
  auto state = std::make_unique<State>();
  state->backendPort = backendPort;
  state->context = SSL_CTX_new(TLS_server_method());
  const std::string pem = certificateFile.string();
  if (SSL_CTX_use_certificate_chain_file(state->context, pem.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(state->context, pem.c_str(), SSL_FILETYPE_PEM) != 1) {
    SSL_CTX_free(state->context);
    return invalidArgument("TLS proxy: cannot load " + pem);
  }
  if (!clientCaFile.empty()) {
    SSL_CTX_load_verify_locations(state->context, clientCaFile.string().c_str(), nullptr);
    SSL_CTX_set_verify(state->context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  state->listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(state->listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(state->listener, 64) != 0 ||
      ::getsockname(state->listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(state->listener);
    SSL_CTX_free(state->context);
    return unavailable("TLS proxy: cannot listen on 127.0.0.1");
  }
  state->port = ntohs(address.sin_port);
  State* s = state.get();
  state->acceptor = std::thread([s] {
    while (!s->stopping) {
      const int client = ::accept(s->listener, nullptr, nullptr);
      if (client < 0) continue;
      s->track(client);
      std::lock_guard lock(s->mutex);
      s->threads.emplace_back([s, client] { s->serve(client); });
    }
  });
  return std::unique_ptr<TlsProxy>(new TlsProxy(std::move(state)));
}

}  // namespace granary::testing
