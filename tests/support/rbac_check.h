// Checks a binary's Kubernetes requests against the RBAC the Helm chart gives its
// ServiceAccount: set recorder() as the binary's client's onResponse, and at the end of a test
// every request must have been allowed by the roles bound to that ServiceAccount in
// `helm template charts/granary` (the real helm, GRANARY_HELM). A list counts as list and watch
// (the informers' watches are not seen here, and need both).
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/helm_chart.h"

namespace granary::testing {

class RbacCheck {
 public:
  // `serviceAccount`: the chart's ServiceAccount of the binary, e.g. "granary-operator".
  explicit RbacCheck(std::string serviceAccount) : serviceAccount_(std::move(serviceAccount)) {}

  // "verb group/resource[/subresource]", e.g. "update granary.io/datasets/status".
  using Permission = std::string;

  std::function<void(const std::string&, const std::string&, int)> recorder() {
    return [this](const std::string& method, const std::string& path, int) {
      const Permission permission = permissionOf(method, path);
      std::lock_guard lock(mutex_);
      used_.insert(permission);
    };
  }

  // Every permission used that the chart does not grant the ServiceAccount; a line saying why
  // when the chart cannot be rendered.
  std::vector<Permission> notGranted() const {
    std::string error;
    const std::set<Permission> granted = grantedPermissions(error);
    if (!error.empty()) return {error};
    std::set<Permission> needed;
    {
      std::lock_guard lock(mutex_);
      for (const auto& p : used_) {
        needed.insert(p);
        if (p.starts_with("list ")) needed.insert("watch " + p.substr(5));
      }
    }
    std::vector<Permission> missing;
    for (const auto& p : needed)
      if (!granted.count(p)) missing.push_back(p);
    return missing;
  }
  std::set<Permission> used() const {
    std::lock_guard lock(mutex_);
    return used_;
  }

  // The permission a request needs, from its method and path.
  static Permission permissionOf(const std::string& method, const std::string& pathAndQuery) {
    std::vector<std::string> parts;
    std::stringstream path(pathAndQuery.substr(0, pathAndQuery.find('?')));
    for (std::string part; std::getline(path, part, '/');)
      if (!part.empty()) parts.push_back(part);
    std::string group;
    size_t at = 0;
    if (!parts.empty() && parts[0] == "api") {
      at = 2;  // api/v1
    } else if (parts.size() > 2) {
      group = parts[1];
      at = 3;  // apis/<group>/<version>
    }
    if (parts.size() > at + 2 && parts[at] == "namespaces") at += 2;
    const std::vector<std::string> rest(parts.begin() + std::min(at, parts.size()), parts.end());
    std::string resource = group + "/" + (rest.empty() ? "" : rest[0]);
    if (rest.size() > 2) resource += "/" + rest[2];
    const bool named = rest.size() > 1;
    const std::string verb = method == "GET"      ? (named ? "get" : "list")
                             : method == "POST"   ? "create"
                             : method == "PUT"    ? "update"
                             : method == "PATCH"  ? "patch"
                             : method == "DELETE" ? (named ? "delete" : "deletecollection")
                                                  : method;
    return verb + " " + resource;
  }

 private:
  // What the roles bound to the ServiceAccount allow, rule by rule ("verb group/resource").
  std::set<Permission> grantedPermissions(std::string& error) const {
    const std::vector<YAML::Node> docs = renderChart("granary-system", error);
    std::set<std::string> boundRoles;  // "Kind/name"
    for (const YAML::Node& doc : docs) {
      if (!doc["roleRef"]) continue;
      for (const auto& subject : doc["subjects"])
        if (subject["kind"].as<std::string>() == "ServiceAccount" &&
            subject["name"].as<std::string>() == serviceAccount_)
          boundRoles.insert(doc["roleRef"]["kind"].as<std::string>() + "/" +
                            doc["roleRef"]["name"].as<std::string>());
    }
    std::set<Permission> granted;
    for (const YAML::Node& doc : docs) {
      if (!doc["rules"] || !boundRoles.count(doc["kind"].as<std::string>() + "/" +
                                             doc["metadata"]["name"].as<std::string>()))
        continue;
      for (const auto& rule : doc["rules"])
        for (const auto& group : rule["apiGroups"])
          for (const auto& resource : rule["resources"])
            for (const auto& verb : rule["verbs"])
              granted.insert(verb.as<std::string>() + " " + group.as<std::string>() + "/" +
                             resource.as<std::string>());
    }
    return granted;
  }

  std::string serviceAccount_;
  mutable std::mutex mutex_;
  std::set<Permission> used_;
};

}  // namespace granary::testing
