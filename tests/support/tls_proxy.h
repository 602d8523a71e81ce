// Terminates TLS on a loopback port and forwards the plain bytes to another loopback port:
// HTTPS (optionally with client-certificate verification) in front of a plain HTTP test
// server. Built on OpenSSL directly.
#pragma once

#include <filesystem>
#include <memory>

#include "common/result.h"

namespace granary::testing {

class TlsProxy {
 public:
  // `certificateFile` holds the server certificate and its key (PEM). With a `clientCaFile`,
  // clients must present a certificate that CA signed.
  static Result<std::unique_ptr<TlsProxy>> start(int backendPort,
                                                 const std::filesystem::path& certificateFile,
                                                 const std::filesystem::path& clientCaFile);
  ~TlsProxy();

  int port() const;

  struct State;

 private:
  explicit TlsProxy(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace granary::testing
