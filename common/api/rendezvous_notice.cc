#include "common/api/rendezvous_notice.h"

#include <curl/curl.h>

#include <memory>

namespace granary::api {
namespace {

size_t keepBody(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

}  // namespace

Status sendRendezvousNotice(const std::string& address, const std::string& notice,
                            std::chrono::milliseconds timeout) {
  const std::string what = "the rendezvous store at " + address;
  const std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(),
                                                                 curl_easy_cleanup);
  if (!curl) return unavailable(what + " was not told: libcurl could not start a request");
  const std::string url = "http://" + address + "/gone";
  std::string answer;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: text/plain");
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

}  // namespace granary::api
