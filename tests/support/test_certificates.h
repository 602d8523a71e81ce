// A throw-away PKI for TLS tests: a CA, a server certificate for 127.0.0.1 and localhost,
// and a client certificate, made with the openssl command in a temporary directory.
#pragma once

#include <filesystem>
#include <string>

#include "common/result.h"

namespace granary::testing {

struct TestCertificates {
  std::filesystem::path directory;
  std::string caPem;
  std::filesystem::path caFile;
  std::filesystem::path serverPemFile;  // certificate followed by its key, as civetweb wants
  std::string clientCertPem;
  std::string clientKeyPem;

  // Unavailable when openssl is missing or fails.
  static Result<TestCertificates> create();
};

}  // namespace granary::testing
