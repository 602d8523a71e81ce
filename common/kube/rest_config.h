// How to reach an API server: from a kubeconfig file, or from inside a pod.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/secret.h"

namespace granary::kube {

struct RestConfig {
  // Base URL, e.g. https://10.0.0.1:6443.
  std::string server;
  // PEM bundle of the CAs that sign the server's certificate; empty: the system's roots.
  std::string caPem;
  // Client certificate and key (PEM) for mutual TLS; both or neither.
  std::string clientCertPem;
  Secret clientKeyPem;
  // A bearer token given once (kubeconfig `token`).
  Secret bearerToken;
  // A file holding the bearer token, re-read when it changes (in-cluster tokens rotate).
  std::filesystem::path tokenFile;
  // Accept any server certificate. Only for test clusters.
  bool insecureSkipTlsVerify = false;
  // The namespace of the context, or of the pod in-cluster. Default "default".
  std::string namespace_ = "default";
  // Timeout of one request (watches get their own, longer, one). Default 30 s.
  std::chrono::seconds timeout{30};
};

// Reads a kubeconfig. `context` empty means current-context. InvalidArgument naming what is
// missing or malformed (unknown context, cluster without server, bad base64, an exec or
// auth-provider user, which granary does not support); NotFound for unreadable files.
Result<RestConfig> loadKubeconfig(const std::filesystem::path& path, std::string_view context = {});

// The service-account configuration of a pod: KUBERNETES_SERVICE_HOST/PORT, and the token,
// CA and namespace under `serviceAccountDir`. FailedPrecondition naming what is missing.
Result<RestConfig> inClusterConfig(const std::filesystem::path& serviceAccountDir =
                                       "/var/run/secrets/kubernetes.io/serviceaccount");

// A binary's --kubeconfig/--context: the kubeconfig when a path is given, else the pod's
// service account.
Result<RestConfig> loadRestConfig(const std::string& kubeconfig, std::string_view context);

}  // namespace granary::kube
