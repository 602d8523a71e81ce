#include "tests/support/test_certificates.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace granary::testing {
namespace {

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<TestCertificates> TestCertificates::create() {
  TestCertificates certs;
  certs.directory =
      std::filesystem::temp_directory_path() / ("granary-pki-" + std::to_string(::getpid()));
  std::filesystem::create_directories(certs.directory);
  const std::string d = certs.directory.string();
  const std::string script =
      "set -e; cd '" + d +
      "';"
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 "
      "  -subj /CN=granary-test-ca 2>/dev/null;"
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n' > "
      "server.ext;"
      "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 "
      "2>/dev/null;"
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt "
      "  -days 2 -extfile server.ext 2>/dev/null;"
      "cat server.crt server.key > server.pem;"
      "printf 'extendedKeyUsage=clientAuth\\n' > client.ext;"
      "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj "
      "/CN=granary-client 2>/dev/null;"
      "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt "
      "  -days 2 -extfile client.ext 2>/dev/null";
  if (std::system(("bash -c \"" + script + "\"").c_str()) != 0) {
    return unavailable("openssl could not make test certificates in " + d);
  }
  certs.caFile = certs.directory / "ca.crt";
  certs.caPem = readFile(certs.caFile);
  certs.serverPemFile = certs.directory / "server.pem";
  certs.clientCertPem = readFile(certs.directory / "client.crt");
  certs.clientKeyPem = readFile(certs.directory / "client.key");
  return certs;
}

}  // namespace granary::testing
