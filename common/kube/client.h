// A Kubernetes REST client on cpprestsdk, to client-go's standard: typed errors from the
// server's Status, retries with jittered backoff on 429, 5xx and connection errors (honouring
// Retry-After, never on other 4xx), timeouts on every request, and watches decoded as they
// stream.
//
// Objects are JSON (web::json::value). Thread-safety: every method may be called from any
// thread; requests share a connection pool, each watch has a connection of its own.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/clock.h"
#include "common/kube/object.h"
#include "common/kube/resource.h"
#include "common/kube/rest_config.h"
#include "common/kube/watch_decoder.h"
#include "common/result.h"

namespace granary::kube {

struct ListOptions {
  std::string labelSelector;
  std::string fieldSelector;
  int64_t limit = 0;          // page size; 0 lets the server decide
  std::string continueToken;  // from the previous page
};

struct ListResult {
  std::vector<Json> items;
  std::string resourceVersion;  // of the list, to watch from
  std::string continueToken;    // "" on the last page
};

struct DeleteOptions {
  std::string propagationPolicy;  // "", Foreground, Background or Orphan
  std::string preconditionUid;    // delete only this incarnation
  std::string preconditionResourceVersion;
  // Unset: the type's default (a pod on a node waits for its kubelet to confirm). 0: at once,
  // the object gone without the kubelet's word (what `kubectl delete --force --grace-period=0`
  // asks), for a pod whose node is lost.
  std::optional<int64_t> gracePeriodSeconds;
};

struct WriteOptions {
  // How the server treats fields its schema does not know: "Strict" refuses the write
  // (InvalidArgument naming the field, as `kubectl` asks), "Warn" or "" (the server's default)
  // drops them with a warning, "Ignore" drops them silently.
  std::string fieldValidation;
  // Checked and admitted as a write would be, but not stored (dryRun=All).
  bool dryRun = false;
};

struct ApplyOptions {
  std::string fieldManager = "granary";
  bool force = true;
};

struct WatchOptions {
  std::string labelSelector;
  std::string fieldSelector;
  std::string resourceVersion;  // watch from here ("" = from now)
  // The server ends the stream after this long; the caller watches again from the last
  // resourceVersion seen. Default 300 s.
  int timeoutSeconds = 300;
  bool allowBookmarks = true;
};

struct ClientOptions {
  // Attempts per request, the first included, for retryable failures. Default 5.
  int maxAttempts = 5;
  // Delays between attempts (a Retry-After from the server takes precedence, capped at max).
  BackoffOptions backoff{};
  // Used for the delays between attempts. Null: realClock().
  Clock* clock = nullptr;
  std::string userAgent = "granary/0.1";
  // Called after every attempt of a request (watches excepted) with its HTTP method, path
  // (with the query) and status code, 0 when no response came (e.g. createCountedClient in
  // runtime_metrics.h).
  std::function<void(const std::string& method, const std::string& path, int code)> onResponse;
};

class Client {
 public:
  // InvalidArgument when the configuration cannot be used (bad URL, unreadable PEM).
  static Result<std::unique_ptr<Client>> create(RestConfig config, ClientOptions options = {});
  ~Client();

  const RestConfig& config() const;

  // Errors: NotFound, Conflict (stale resourceVersion), AlreadyExists, InvalidArgument
  // (rejected by validation), Unauthenticated, PermissionDenied, Gone, ResourceExhausted,
  // Unavailable and DeadlineExceeded (after retries), Cancelled.
  Result<Json> get(const ResourceType& type, const std::string& ns, const std::string& name);
  // One page. `ns` empty lists every namespace.
  Result<ListResult> list(const ResourceType& type, const std::string& ns,
                          const ListOptions& options = {});
  // Every page, following continue tokens; the resourceVersion is the first page's.
  Result<ListResult> listAll(const ResourceType& type, const std::string& ns,
                             ListOptions options = {});
  Result<Json> create(const ResourceType& type, const std::string& ns, const Json& object,
                      const WriteOptions& options = {});
  // PUT of the whole object; its metadata.resourceVersion must be current (else Conflict).
  Result<Json> update(const ResourceType& type, const Json& object,
                      const WriteOptions& options = {});
  // PUT of the status subresource; spec changes in `object` are ignored by the server.
  Result<Json> updateStatus(const ResourceType& type, const Json& object);
  Status remove(const ResourceType& type, const std::string& ns, const std::string& name,
                const DeleteOptions& options = {});
  // application/merge-patch+json on the object or a subresource ("status").
  Result<Json> mergePatch(const ResourceType& type, const std::string& ns, const std::string& name,
                          const Json& patch, const std::string& subresource = {});
  // Server-side apply (application/apply-patch+yaml; JSON is YAML).
  Result<Json> apply(const ResourceType& type, const std::string& ns, const std::string& name,
                     const Json& object, const ApplyOptions& options = {},
                     const std::string& subresource = {});
  // POST pods/{name}/binding to `node`. Conflict when the pod is already bound.
  Status bindPod(const std::string& ns, const std::string& name, const std::string& uid,
                 const std::string& node);

  // Streams events to `onEvent` until the server ends the stream (OK), the stream breaks
  // (Unavailable; a truncated last line is dropped), the server refuses the
  // resourceVersion (Gone, by HTTP 410 or an ERROR event with code 410; re-list), or `stop`
  // is requested (Cancelled). No retries: informers own the resume policy.
  Status watch(const ResourceType& type, const std::string& ns, const WatchOptions& options,
               const std::function<void(WatchEvent&&)>& onEvent, std::stop_token stop);

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace granary::kube
