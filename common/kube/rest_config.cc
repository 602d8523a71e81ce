#include "common/kube/rest_config.h"

#include <cpprest/asyncrt_utils.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/config.h"

namespace granary::kube {
namespace {

Result<std::string> readText(const std::filesystem::path& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return notFound(std::string(what) + " " + path.string() + " cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<std::string> decodeBase64(const std::string& text, const config::Node& where) {
  try {
    const auto bytes = utility::conversions::from_base64(text);
    return std::string(bytes.begin(), bytes.end());
  } catch (const std::exception&) {
    return config::expected(where, "base64-encoded PEM data");
  }
}

// Finds the entry named `name` in a kubeconfig list (clusters, users, contexts) and returns
// its inner object (`cluster`, `user`, `context`).
Result<const config::Node*> namedEntry(const config::Node& root, const char* list,
                                       const char* inner, const std::string& name) {
  const config::Node* entries = root.find(list);
  if (entries && entries->isList()) {
    for (const auto& entry : entries->items()) {
      const config::Node* entryName = entry.find("name");
      if (entryName && entryName->isScalar() && entryName->scalar() == name) {
        const config::Node* value = entry.find(inner);
        if (!value || !value->isMap())
          return config::expected(entry, std::string("a map under ") + inner);
        return value;
      }
    }
  }
  return invalidArgument(root.source() + ": " + list + ": no entry named \"" + name + "\"");
}

// Reads `<field>` (a path, relative to the kubeconfig) or `<field>-data` (base64 PEM).
Result<std::string> pemField(const config::Node& node, const std::string& field,
                             const std::filesystem::path& baseDir) {
  if (const config::Node* data = node.find(field + "-data"); data && data->isScalar()) {
    return decodeBase64(data->scalar(), *data);
  }
  if (const config::Node* file = node.find(field); file && file->isScalar()) {
    std::filesystem::path path = file->scalar();
    if (path.is_relative()) path = baseDir / path;
    return readText(path, field);
  }
  return std::string();
}

std::string scalarOr(const config::Node& node, const char* field, std::string fallback = {}) {
  const config::Node* value = node.find(field);
  return value && value->isScalar() ? value->scalar() : fallback;
}

}  // namespace

Result<RestConfig> loadKubeconfig(const std::filesystem::path& path, std::string_view context) {
  GRANARY_ASSIGN_OR_RETURN(auto documents, config::loadFile(path));
  if (documents.size() != 1 || !documents[0].isMap()) {
    return invalidArgument(path.string() + ": expected one kubeconfig document");
  }
  const config::Node& root = documents[0];
  const std::filesystem::path baseDir = path.parent_path();

  std::string contextName(context);
  if (contextName.empty()) contextName = scalarOr(root, "current-context");
  if (contextName.empty()) {
    return invalidArgument(path.string() + ": current-context is not set; name a context");
  }
  GRANARY_ASSIGN_OR_RETURN(const config::Node* ctx,
                           namedEntry(root, "contexts", "context", contextName));
  const std::string clusterName = scalarOr(*ctx, "cluster");
  const std::string userName = scalarOr(*ctx, "user");
  if (clusterName.empty())
    return invalidArgument(ctx->where() + ".cluster: required field is missing");

  RestConfig config;
  config.namespace_ = scalarOr(*ctx, "namespace", "default");

  GRANARY_ASSIGN_OR_RETURN(const config::Node* cluster,
                           namedEntry(root, "clusters", "cluster", clusterName));
  config.server = scalarOr(*cluster, "server");
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return invalidArgument(cluster->where() + ".server: expected an http(s):// URL, got \"" +
                           config.server + "\"");
  }
  while (!config.server.empty() && config.server.back() == '/') config.server.pop_back();
  config.insecureSkipTlsVerify = scalarOr(*cluster, "insecure-skip-tls-verify") == "true";
  GRANARY_ASSIGN_OR_RETURN(config.caPem, pemField(*cluster, "certificate-authority", baseDir));

  if (!userName.empty()) {
    GRANARY_ASSIGN_OR_RETURN(const config::Node* user, namedEntry(root, "users", "user", userName));
    for (const char* unsupported : {"exec", "auth-provider"}) {
      if (user->find(unsupported)) {
        return invalidArgument(user->where() + "." + unsupported + ": credential plugins are not " +
                               "supported; give the user a token or a client certificate");
      }
    }
    GRANARY_ASSIGN_OR_RETURN(config.clientCertPem, pemField(*user, "client-certificate", baseDir));
    GRANARY_ASSIGN_OR_RETURN(auto key, pemField(*user, "client-key", baseDir));
    config.clientKeyPem = Secret(std::move(key));
    if (config.clientCertPem.empty() != config.clientKeyPem.empty()) {
      return invalidArgument(user->where() + ": client-certificate and client-key go together");
    }
    config.bearerToken = Secret(scalarOr(*user, "token"));
    if (const std::string tokenFile = scalarOr(*user, "tokenFile"); !tokenFile.empty()) {
      config.tokenFile = tokenFile;
      if (config.tokenFile.is_relative()) config.tokenFile = baseDir / config.tokenFile;
    }
  }
  return config;
}

Result<RestConfig> inClusterConfig(const std::filesystem::path& serviceAccountDir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return failedPrecondition(
        "not running in a pod: KUBERNETES_SERVICE_HOST and "
        "KUBERNETES_SERVICE_PORT are not set; pass --kubeconfig");
  }
  RestConfig config;
  const std::string hostText(host);
  config.server = "https://" +
                  (hostText.find(':') != std::string::npos ? "[" + hostText + "]" : hostText) +
                  ":" + port;
  config.tokenFile = serviceAccountDir / "token";
  if (!std::filesystem::exists(config.tokenFile)) {
    return failedPrecondition("service-account token " + config.tokenFile.string() +
                              " is missing; is automountServiceAccountToken off?");
  }
  GRANARY_ASSIGN_OR_RETURN(config.caPem,
                           readText(serviceAccountDir / "ca.crt", "service-account CA"));
  if (auto ns = readText(serviceAccountDir / "namespace", "namespace"); ns.isOk()) {
    config.namespace_ = *ns;
    while (!config.namespace_.empty() &&
           std::isspace(static_cast<unsigned char>(config.namespace_.back()))) {
      config.namespace_.pop_back();
    }
  }
  return config;
}

Result<RestConfig> loadRestConfig(const std::string& kubeconfig, std::string_view context) {
  return kubeconfig.empty() ? inClusterConfig() : loadKubeconfig(kubeconfig, context);
}

}  // namespace granary::kube
