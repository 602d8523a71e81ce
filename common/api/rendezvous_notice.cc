#include "common/api/rendezvous_notice.h"

#include <cpprest/http_client.h>

namespace granary::api {

Status sendRendezvousNotice(const std::string& address, const std::string& notice,
                            std::chrono::milliseconds timeout) {
  const std::string what = "the rendezvous store at " + address;
  try {
    web::http::client::http_client_config config;
    config.set_timeout(timeout);
    web::http::client::http_client client("http://" + address, config);
    web::http::http_request request(web::http::methods::POST);
    request.set_request_uri("/gone");
    request.set_body(notice, "text/plain");
    const web::http::http_response response = client.request(request).get();
    if (response.status_code() == web::http::status_codes::NoContent) return Status::ok();
    return unavailable(what + " answered " + std::to_string(response.status_code()) + ": " +
                       response.extract_utf8string(true).get());
  } catch (const std::exception& e) {
    return unavailable(what + " was not told: " + e.what());
  }
}

}  // namespace granary::api
