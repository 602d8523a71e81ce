#include "tests/support/http_get.h"

#include <curl/curl.h>

namespace granary::testing {
namespace {

size_t appendBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

long request(const std::string& url, const std::string* post, std::string& body) {
  CURL* curl = curl_easy_init();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_slist* headers = nullptr;
  if (post) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post->c_str());
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, appendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  long code = 0;
  if (curl_easy_perform(curl) == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(curl);
  curl_slist_free_all(headers);
  return code;
}

}  // namespace

long httpGet(const std::string& url, std::string& body) { return request(url, nullptr, body); }

long httpPost(const std::string& url, const std::string& post, std::string& body) {
  return request(url, &post, body);
}

}  // namespace granary::testing
