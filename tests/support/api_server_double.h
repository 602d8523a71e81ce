// An in-process Kubernetes API server for tests: the semantics granary relies on, over real
// HTTP on loopback, for the core kinds granary touches and for the CRDs in crds/.
//
// Implemented: monotonically increasing resourceVersions; create (generateName, AlreadyExists,
// namespace must exist), get, list (label and field selectors, limit/continue), update (409
// on a stale resourceVersion; generation bumps on spec changes), the status subresource split
// (the main resource ignores status, /status ignores everything else), merge patch, apply (as a
// merge patch that creates when missing), delete (preconditions, finalizers and
// deletionTimestamp, gracePeriodSeconds accepted; deleting a namespace deletes its objects),
// pods/binding (409 when
// already bound), watch (from a resourceVersion, with bookmarks, timeoutSeconds, 410 Gone for
// resourceVersions older than the retained history), CRD registration (from crds/*.yaml or a
// POST of the CRD), schema defaults for custom resources, bearer-token authentication, and what
// a real server checks and changes on writes where granary depends on it (api_server_rules.h):
// structural-schema pruning and fieldValidation=Strict, name and label validation, pod
// defaulting and validation with the ServiceAccount admission, the not-ready taint of new Nodes
// (no node lifecycle controller takes it off: TestNode's heartbeat does, as on a cluster without
// a controller manager), a default ServiceAccount in each namespace, Terminating namespaces that
// refuse new content and go once their finalized objects are gone, and dryRun=All on creates.
//
// Not implemented: OpenAPI validation of values and CEL rules (tests/crds covers those), the
// schemas of built-in kinds other than pods, field ownership and apply conflicts (apply never
// conflicts, removed fields are kept), garbage collection of owned objects, propagationPolicy
// (accepted, ignored), consistent snapshots for paginated lists (a continue token resumes after
// the last key), watch caches per resource version for lists, discovery endpoints, strategic
// merge patch, JSON patch, TLS, RBAC, the node lifecycle controller's timeouts, and graceful
// deletion of pods (a pod deleted is gone at once, as a real server deletes one not bound to a
// node, or any with gracePeriodSeconds 0; there, a bound pod waits for its kubelet).
//
// Fault injection: failNextRequests (e.g. 429 with Retry-After, 500), setLatency,
// dropWatches (ends every open watch mid-line), refuseWatches, compact (forgets history: old
// resourceVersions get 410).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "common/kube/object.h"
#include "common/kube/rest_config.h"
#include "common/result.h"

namespace granary::testing {

struct ApiServerDoubleOptions {
  // Required bearer token; empty accepts any request. setToken() changes it later.
  std::string token;
  // Events kept for watches; older resourceVersions get 410. Default 100,000.
  size_t historyLimit = 100'000;
  // Period of BOOKMARK events on watches that allow them. Default 1 s.
  std::chrono::milliseconds bookmarkInterval{1000};
  // CRDs to register at start (every *.yaml in the folder); empty for none.
  std::filesystem::path crdDirectory;
  // Serve HTTPS with this certificate and key (one PEM file); empty serves plain HTTP. Make
  // one with TestCertificates (test_certificates.h).
  std::filesystem::path tlsCertificateFile;
  // With TLS: require client certificates signed by this CA file.
  std::filesystem::path clientCaFile;
};

class ApiServerDouble {
 public:
  // Listens on 127.0.0.1 on a free port.
  static Result<std::unique_ptr<ApiServerDouble>> start(ApiServerDoubleOptions options = {});
  ~ApiServerDouble();

  std::string url() const;
  // A RestConfig that reaches this server (with the token, when one is required).
  kube::RestConfig restConfig() const;

  // Registers a CustomResourceDefinition (apiextensions.k8s.io/v1 JSON).
  Status registerCrd(const kube::Json& crd);

  // Requires a different bearer token from now on (as when a service-account token rotates).
  void setToken(const std::string& token);
  // The next `count` successful responses carry a body that is not JSON.
  void garbleNextResponses(int count);
  // The next `count` requests fail with `httpStatus` (and Retry-After when >= 0).
  void failNextRequests(int count, int httpStatus, int retryAfterSeconds = -1);
  // Every request waits this long before it is handled.
  void setLatency(std::chrono::milliseconds latency);
  // Ends every open watch abruptly, in the middle of an event line.
  void dropWatches();
  // While true, new watches are refused with 503 (other requests are served).
  void refuseWatches(bool refuse);
  // Forgets all retained events: watches from any earlier resourceVersion get 410 Gone.
  void compact();

  uint64_t resourceVersion() const;
  int openWatches() const;
  // Watches ever started (never decreases), to wait for a new one.
  int64_t watchesStarted() const;
  // Requests handled so far (faults included).
  int64_t requestCount() const;

  struct State;

 private:
  explicit ApiServerDouble(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace granary::testing
