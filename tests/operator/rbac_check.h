// Checks the operator's Kubernetes requests against the RBAC manifest it ships
// (deploy/operator-rbac.yaml): set recorder() as the operator client's onResponse, and at the
// end of a test every request must have been allowed. A list counts as list and watch (the
// informers' watches are not seen here, and need both).
#pragma once

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace granary::testing {

class RbacCheck {
 public:
  // "verb group/resource[/subresource]", e.g. "update granary.io/datasets/status".
  using Permission = std::string;

  std::function<void(const std::string&, const std::string&, int)> recorder() {
    return [this](const std::string& method, const std::string& path, int) {
      const Permission permission = permissionOf(method, path);
      std::lock_guard lock(mutex_);
      used_.insert(permission);
    };
  }

  // Every permission used that deploy/operator-rbac.yaml does not grant.
  std::vector<Permission> notGranted() const {
    const std::set<Permission> granted = grantedPermissions();
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
  static std::set<Permission> grantedPermissions() {
    std::set<Permission> granted;
    const auto file = std::filesystem::path(GRANARY_SOURCE_DIR) / "deploy" / "operator-rbac.yaml";
    for (const YAML::Node& doc : YAML::LoadAllFromFile(file.string())) {
      if (!doc["kind"] || (doc["kind"].as<std::string>() != "ClusterRole" &&
                           doc["kind"].as<std::string>() != "Role"))
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

  mutable std::mutex mutex_;
  std::set<Permission> used_;
};

}  // namespace granary::testing
