#include "common/kube/client.h"

#include <cpprest/http_client.h>
#include <cpprest/rawptrstream.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/kube/api_error.h"
#include "common/thread_annotations.h"
#include "common/url.h"

namespace granary::kube {
namespace {

namespace http = web::http;
using http::client::http_client;
using http::client::http_client_config;

constexpr const char* kJson = "application/json";

std::string query(std::initializer_list<std::pair<const char*, std::string>> params) {
  std::string out;
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    out += out.empty() ? "?" : "&";
    out += key;
    out += "=";
    out += percentEncode(value);
  }
  return out;
}

std::string describe(const http::method& method, const std::string& path) {
  return method + " " + path;
}

}  // namespace

struct Client::Impl {
  RestConfig config;
  ClientOptions options;
  std::unique_ptr<http_client> requests;

  Mutex tokenMutex;  // the token file's cached contents
  std::string token GRANARY_GUARDED_BY(tokenMutex);
  std::filesystem::file_time_type tokenModified GRANARY_GUARDED_BY(tokenMutex){};

  http_client_config clientConfig(std::chrono::seconds timeout) const {
    http_client_config c;
    c.set_timeout(timeout);
    c.set_validate_certificates(!config.insecureSkipTlsVerify);
    const std::string ca = config.caPem;
    const std::string cert = config.clientCertPem;
    const std::string key = config.clientKeyPem.reveal();
    c.set_ssl_context_callback([ca, cert, key](boost::asio::ssl::context& context) {
      if (!ca.empty()) context.add_certificate_authority(boost::asio::buffer(ca));
      if (!cert.empty()) {
        context.use_certificate_chain(boost::asio::buffer(cert));
        context.use_private_key(boost::asio::buffer(key), boost::asio::ssl::context::pem);
      }
    });
    return c;
  }

  // The bearer token: the configured one, or the token file re-read when it changed.
  std::string bearerToken() {
    if (config.tokenFile.empty()) return config.bearerToken.reveal();
    MutexLock lock(tokenMutex);
    std::error_code error;
    const auto modified = std::filesystem::last_write_time(config.tokenFile, error);
    if (!error && (token.empty() || modified != tokenModified)) {
      std::ifstream in(config.tokenFile);
      std::ostringstream text;
      text << in.rdbuf();
      token = text.str();
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
        token.pop_back();
      tokenModified = modified;
    }
    return token;
  }

  http::http_request makeRequest(const http::method& method, const std::string& pathAndQuery) {
    http::http_request request(method);
    request.set_request_uri(pathAndQuery);
    request.headers().add("Accept", kJson);
    request.headers().add("User-Agent", options.userAgent);
    if (const std::string t = bearerToken(); !t.empty()) {
      request.headers().add("Authorization", "Bearer " + t);
    }
    return request;
  }

  // Sends one request with retries; returns the parsed JSON body of a 2xx response.
  Result<Json> send(const http::method& method, const std::string& pathAndQuery, const Json* body,
                    const char* contentType) {
    Clock& clock = options.clock ? *options.clock : realClock();
    Backoff backoff(options.backoff);
    const std::string operation = describe(method, pathAndQuery);
    Status last;
    for (int attempt = 1; attempt <= options.maxAttempts; ++attempt) {
      std::optional<int> retryAfter;
      try {
        http::http_request request = makeRequest(method, pathAndQuery);
        if (body) request.set_body(body->serialize(), contentType);
        http::http_response response = requests->request(request).get();
        const std::string text = response.extract_utf8string(true).get();
        const int code = response.status_code();
        if (options.onResponse) options.onResponse(method, pathAndQuery, code);
        if (code >= 200 && code < 300) {
          if (text.empty()) return Json::object();
          Result<Json> json = parseJson(text);
          if (!json) return internalError(operation + ": response is " + json.status().message());
          return json;
        }
        last = statusFromHttp(code, text, operation);
        if (response.headers().has("Retry-After")) {
          retryAfter = parseRetryAfterSeconds(response.headers()["Retry-After"]);
        }
      } catch (const http::http_exception& e) {
        last = unavailable(operation + ": " + e.what());
        if (options.onResponse) options.onResponse(method, pathAndQuery, 0);
      } catch (const std::exception& e) {
        last = unavailable(operation + ": " + e.what());
        if (options.onResponse) options.onResponse(method, pathAndQuery, 0);
      }
      if (!isRetryable(last) || attempt == options.maxAttempts) break;
      auto delay = backoff.next();
      if (retryAfter) {
        delay = std::min<std::chrono::milliseconds>(std::chrono::seconds(*retryAfter),
                                                    options.backoff.max);
      }
      clock.sleepFor(delay, std::stop_token{});
    }
    return last;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::create(RestConfig config, ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->options = std::move(options);
  if (impl->options.maxAttempts < 1) impl->options.maxAttempts = 1;
  try {
    impl->requests = std::make_unique<http_client>(impl->config.server,
                                                   impl->clientConfig(impl->config.timeout));
  } catch (const std::exception& e) {
    return invalidArgument("API server URL \"" + impl->config.server + "\": " + e.what());
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const RestConfig& Client::config() const { return impl_->config; }

Result<Json> Client::get(const ResourceType& type, const std::string& ns, const std::string& name) {
  return impl_->send(http::methods::GET, resourcePath(type, ns, name), nullptr, nullptr);
}

Result<ListResult> Client::list(const ResourceType& type, const std::string& ns,
                                const ListOptions& options) {
  const std::string path = resourcePath(type, ns) +
                           query({{"labelSelector", options.labelSelector},
                                  {"fieldSelector", options.fieldSelector},
                                  {"limit", options.limit > 0 ? std::to_string(options.limit) : ""},
                                  {"continue", options.continueToken}});
  GRANARY_ASSIGN_OR_RETURN(Json body, impl_->send(http::methods::GET, path, nullptr, nullptr));
  ListResult result;
  if (body.has_object_field("metadata")) {
    const auto& metadata = body.at("metadata");
    if (metadata.has_string_field("resourceVersion")) {
      result.resourceVersion = metadata.at("resourceVersion").as_string();
    }
    if (metadata.has_string_field("continue"))
      result.continueToken = metadata.at("continue").as_string();
  }
  if (body.has_array_field("items")) {
    for (auto& item : body.at("items").as_array()) {
      // Items of a list carry no kind; restore it so cached objects are complete.
      if (!item.has_field("kind")) item["kind"] = Json::string(type.kind);
      if (!item.has_field("apiVersion")) item["apiVersion"] = Json::string(type.apiVersion());
      result.items.push_back(std::move(item));
    }
  }
  return result;
}

Result<ListResult> Client::listAll(const ResourceType& type, const std::string& ns,
                                   ListOptions options) {
  ListResult all;
  bool first = true;
  do {
    GRANARY_ASSIGN_OR_RETURN(ListResult page, list(type, ns, options));
    if (first) all.resourceVersion = page.resourceVersion;
    first = false;
    for (auto& item : page.items) all.items.push_back(std::move(item));
    options.continueToken = page.continueToken;
  } while (!options.continueToken.empty());
  return all;
}

Result<Json> Client::create(const ResourceType& type, const std::string& ns, const Json& object,
                            const WriteOptions& options) {
  return impl_->send(http::methods::POST,
                     resourcePath(type, ns) + query({{"fieldValidation", options.fieldValidation},
                                                     {"dryRun", options.dryRun ? "All" : ""}}),
                     &object, kJson);
}

Result<Json> Client::update(const ResourceType& type, const Json& object,
                            const WriteOptions& options) {
  return impl_->send(http::methods::PUT,
                     resourcePath(type, namespaceOf(object), nameOf(object)) +
                         query({{"fieldValidation", options.fieldValidation},
                                {"dryRun", options.dryRun ? "All" : ""}}),
                     &object, kJson);
}

Result<Json> Client::updateStatus(const ResourceType& type, const Json& object) {
  return impl_->send(http::methods::PUT,
                     resourcePath(type, namespaceOf(object), nameOf(object), "status"), &object,
                     kJson);
}

Status Client::remove(const ResourceType& type, const std::string& ns, const std::string& name,
                      const DeleteOptions& options) {
  Json body = Json::object();
  body["apiVersion"] = Json::string("v1");
  body["kind"] = Json::string("DeleteOptions");
  if (!options.propagationPolicy.empty()) {
    body["propagationPolicy"] = Json::string(options.propagationPolicy);
  }
  if (!options.preconditionUid.empty() || !options.preconditionResourceVersion.empty()) {
    Json preconditions = Json::object();
    if (!options.preconditionUid.empty())
      preconditions["uid"] = Json::string(options.preconditionUid);
    if (!options.preconditionResourceVersion.empty()) {
      preconditions["resourceVersion"] = Json::string(options.preconditionResourceVersion);
    }
    body["preconditions"] = preconditions;
  }
  if (options.gracePeriodSeconds)
    body["gracePeriodSeconds"] = Json::number(*options.gracePeriodSeconds);
  return impl_->send(http::methods::DEL, resourcePath(type, ns, name), &body, kJson).status();
}

Result<Json> Client::mergePatch(const ResourceType& type, const std::string& ns,
                                const std::string& name, const Json& patch,
                                const std::string& subresource) {
  return impl_->send(http::methods::PATCH, resourcePath(type, ns, name, subresource), &patch,
                     "application/merge-patch+json");
}

Result<Json> Client::apply(const ResourceType& type, const std::string& ns, const std::string& name,
                           const Json& object, const ApplyOptions& options,
                           const std::string& subresource) {
  const std::string path =
      resourcePath(type, ns, name, subresource) +
      query({{"fieldManager", options.fieldManager}, {"force", options.force ? "true" : ""}});
  return impl_->send(http::methods::PATCH, path, &object, "application/apply-patch+yaml");
}

Status Client::bindPod(const std::string& ns, const std::string& name, const std::string& uid,
                       const std::string& node) {
  Json binding = Json::object();
  binding["apiVersion"] = Json::string("v1");
  binding["kind"] = Json::string("Binding");
  binding["metadata"] = Json::object();
  binding["metadata"]["name"] = Json::string(name);
  binding["metadata"]["namespace"] = Json::string(ns);
  if (!uid.empty()) binding["metadata"]["uid"] = Json::string(uid);
  binding["target"] = Json::object();
  binding["target"]["apiVersion"] = Json::string("v1");
  binding["target"]["kind"] = Json::string("Node");
  binding["target"]["name"] = Json::string(node);
  return impl_
      ->send(http::methods::POST, resourcePath(resources::pods(), ns, name, "binding"), &binding,
             kJson)
      .status();
}

Status Client::watch(const ResourceType& type, const std::string& ns, const WatchOptions& options,
                     const std::function<void(WatchEvent&&)>& onEvent, std::stop_token stop) {
  const std::string path = resourcePath(type, ns) +
                           query({{"watch", "1"},
                                  {"labelSelector", options.labelSelector},
                                  {"fieldSelector", options.fieldSelector},
                                  {"resourceVersion", options.resourceVersion},
                                  {"timeoutSeconds", std::to_string(options.timeoutSeconds)},
                                  {"allowWatchBookmarks", options.allowBookmarks ? "true" : ""}});
  const std::string operation = "watch " + path;
  if (stop.stop_requested()) return {StatusCode::kCancelled, operation + ": stopped"};

  pplx::cancellation_token_source cancel;
  std::stop_callback onStop(stop, [&cancel] { cancel.cancel(); });
  try {
    // A connection of its own, whose timeout outlasts the server's: the server ends the stream.
    http_client client(impl_->config.server,
                       impl_->clientConfig(std::chrono::seconds(options.timeoutSeconds + 30)));
    http::http_response response =
        client.request(impl_->makeRequest(http::methods::GET, path), cancel.get_token()).get();
    if (response.status_code() != 200) {
      return statusFromHttp(response.status_code(), response.extract_utf8string(true).get(),
                            operation);
    }
    auto buffer = response.body().streambuf();
    WatchDecoder decoder;
    std::vector<WatchEvent> events;
    std::vector<char> chunk(64 * 1024);
    while (!stop.stop_requested()) {
      // Block for one byte, then take whatever else has arrived: events are delivered as
      // soon as their line is complete, however small.
      const auto first = buffer.bumpc().get();
      if (first == concurrency::streams::streambuf<uint8_t>::traits::eof()) break;
      chunk[0] = static_cast<char>(first);
      const size_t available = std::min(buffer.in_avail(), chunk.size() - 1);
      const size_t more =
          available ? buffer.getn(reinterpret_cast<uint8_t*>(chunk.data() + 1), available).get()
                    : 0;
      events.clear();
      GRANARY_RETURN_IF_ERROR(
          decoder.feed(std::string_view(chunk.data(), 1 + more), events).withContext(operation));
      for (auto& event : events) {
        if (event.type == WatchEvent::Type::kError) {
          const auto& status = event.object;
          const int code = status.has_integer_field("code") ? status.at("code").as_integer() : 500;
          return statusFromHttp(code, status.serialize(), operation);
        }
        onEvent(std::move(event));
      }
    }
  } catch (const pplx::task_canceled&) {
    return {StatusCode::kCancelled, operation + ": stopped"};
  } catch (const std::exception& e) {
    if (stop.stop_requested()) return {StatusCode::kCancelled, operation + ": stopped"};
    return unavailable(operation + ": " + e.what());
  }
  if (stop.stop_requested()) return {StatusCode::kCancelled, operation + ": stopped"};
  return Status::ok();
}

}  // namespace granary::kube
