// charts/granary as `helm install` renders it, with the real helm (GRANARY_HELM) and the chart's
// default values: the documents of `helm template granary charts/granary --namespace NS`.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <string>
#include <vector>

namespace granary::testing {

// The rendered documents; an empty list and `error` set when helm fails. `extraArgs` go to helm
// as they are (e.g. "--set cacheNode.fileOriginRoots={/srv/datasets}").
inline std::vector<YAML::Node> renderChart(const std::string& ns, std::string& error,
                                           const std::string& extraArgs = "") {
  const std::string command = std::string(GRANARY_HELM) + " template granary " +
                              GRANARY_SOURCE_DIR + "/charts/granary --namespace " + ns +
                              (extraArgs.empty() ? "" : " " + extraArgs);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    error = "cannot run " + command;
    return {};
  }
  std::string out;
  char buffer[65536];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  if (::pclose(pipe) != 0) {
    error = "helm template failed: " + command;
    return {};
  }
  std::vector<YAML::Node> docs;
  for (const YAML::Node& doc : YAML::LoadAll(out))
    if (doc.IsMap()) docs.push_back(doc);
  return docs;
}

// The document of that kind and name; a null node when there is none.
inline YAML::Node findObject(const std::vector<YAML::Node>& docs, const std::string& kind,
                             const std::string& name) {
  for (const YAML::Node& doc : docs)
    if (doc["kind"].as<std::string>() == kind && doc["metadata"]["name"].as<std::string>() == name)
      return doc;
  return YAML::Node();
}

}  // namespace granary::testing
