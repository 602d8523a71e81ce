#include "common/api/rendezvous_notice.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <memory>
#include <cstdio>
#include <cstdlib>

namespace granary::api {
namespace {

size_t keepBody(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

std::string hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

}  // namespace

Status sendRendezvousNotice(const std::string& address, const std::string& notice,
                            const std::string& token, std::chrono::milliseconds timeout) {
  const std::string what = "the rendezvous store at " + address;
  const std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(),
                                                                 curl_easy_cleanup);
  if (!curl) return unavailable(what + " was not told: libcurl could not start a request");
  const std::string url = "http://" + address + "/gone";
  std::string answer;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: text/plain");
  const std::string authorization = "Authorization: Bearer " + token;
  headers = curl_slist_append(headers, authorization.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, notice.data());
  curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(notice.size()));
  curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, long(timeout.count()));
  curl_easy_setopt(curl.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, keepBody);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &answer);
  const CURLcode sent = curl_easy_perform(curl.get());
  curl_slist_free_all(headers);
  if (sent != CURLE_OK) return unavailable(what + " was not told: " + curl_easy_strerror(sent));
  long status = 0;
  curl_easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status == 204) return Status::ok();
  return unavailable(what + " answered " + std::to_string(status) + ": " + answer);
}

std::string rendezvousNoticeToken(std::string_view key, std::string_view jobUid) {
  if (key.empty()) return "";
  const std::string message = "granary rendezvous notices of job " + std::string(jobUid);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &size))
    return "";  // only when OpenSSL cannot compute SHA-256 at all: no token, notices refused
  return hex(digest, size);
}

std::string randomRendezvousToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {  // the kernel's randomness gone: nothing is safe
    std::fputs("granary: OpenSSL's RAND_bytes failed; no secret token can be made\n", stderr);
    std::abort();
  }
  return hex(bytes, sizeof bytes);
}

}  // namespace granary::api
